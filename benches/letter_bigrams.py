# The letter-pair surprisal table of `Estimate` (`SURPRISAL` in agentstate/src/context/tokens.rs):
# -log2 P(letter | letter before it) in quarter bits, counted on English and code, the Rust
# sources of crates.io crates (every fourth .rs file, sorted by path: 23 MB of identifiers and
# English comments; a word split at a camelCase capital; row 26 is a word's start).
#
#   python3 benches/letter_bigrams.py ~/.cargo/registry/src/<index>/ > table.txt
import sys, os, re, math, glob
root = sys.argv[1]
files = sorted(glob.glob(root + '/**/*.rs', recursive=True))[::4]
counts = [[0]*27 for _ in range(27)]
word = re.compile(rb'[A-Za-z]+')
n = 0
for f in files:
    data = open(f, 'rb').read()
    n += len(data)
    for m in word.finditer(data):
        w = m.group()
        prev = 26
        last_lower = False
        for b in w:
            upper = 65 <= b <= 90
            c = (b | 32) - 97
            if upper and last_lower:
                counts[prev][26] += 1
                prev = 26
            counts[prev][c] += 1
            prev = c
            last_lower = not upper
        counts[prev][26] += 1
print('bytes', n, file=sys.stderr)
# surprisal in quarter bits, P(c | prev), add-0.5 smoothing over 26 letters
rows = []
for p in range(27):
    tot = sum(counts[p][:26]) + 0.5*26
    rows.append([min(255, round(-4*math.log2((counts[p][c]+0.5)/tot))) for c in range(26)])
for p, r in enumerate(rows):
    print('    [' + ', '.join('%3d' % x for x in r) + '], // ' + ('abcdefghijklmnopqrstuvwxyz_'[p]))
