// Compares two files of result lines ({"messages", "state", "ignored"}), numbers by value.
//   node compare.js official.jsonl ours.jsonl
const fs = require("fs");
const { isDeepStrictEqual } = require("util");
const lines = (f) => fs.readFileSync(f, "utf8").trim().split("\n").map((l) => JSON.parse(l));
const [official, ours] = process.argv.slice(2).map(lines);
let agree = 0;
official.forEach((expected, i) => {
  if (isDeepStrictEqual(expected, ours[i])) agree++;
  else console.log(`stream ${i} differs:\n  official ${JSON.stringify(expected)}\n  ours     ${JSON.stringify(ours[i])}`);
});
console.log(`${agree} of ${official.length} streams agree`);
