//! `#[agent_state(deserialize)]`: the derive's one-pass `Deserialize` gives what serde's derive
//! (with `#[serde(flatten)]` on the base) gives, value for value and error for error, on JSON
//! with missing, duplicate, unknown and ill-typed keys, base keys before, after and between the
//! state's own, and through a chain of extensions.

use proptest::prelude::*;
use serde::de::DeserializeOwned;
use std::fmt::Debug;

fn seven() -> u8 {
    7
}

/// The same states twice: with the opt-in, and with serde's derive (the twin).
macro_rules! states {
    ($(#[$opt:meta])* ; $($de:path)?) => {
        use agentstate::AgentState;

        /// Every supported field option.
        #[derive(AgentState, Debug, Clone, Default, PartialEq, serde::Serialize $(, $de)?)]
        $(#[$opt])*
        pub struct Ext {
            #[agent_state(base)]
            #[serde(flatten)]
            pub base: agentstate::state::AgentState,
            pub order_id: Option<String>,
            pub confirmed: bool,
            #[serde(rename = "n")]
            pub count: u32,
            #[serde(default)]
            pub tags: Vec<String>,
            #[serde(default = "super::seven")]
            pub level: u8,
            #[agent_state(skip)]
            #[serde(skip)]
            pub cache: u8,
            #[agent_state(skip)]
            #[serde(skip_deserializing)]
            pub note: String,
        }

        /// Unknown keys refused, with a base.
        #[derive(AgentState, Debug, Clone, Default, PartialEq, serde::Serialize $(, $de)?)]
        $(#[$opt])*
        #[serde(deny_unknown_fields)]
        pub struct Strict {
            #[agent_state(base)]
            #[serde(flatten)]
            pub base: agentstate::state::AgentState,
            pub confirmed: bool,
            pub order_id: Option<String>,
        }

        /// Container default and rename_all.
        #[derive(AgentState, Debug, Clone, Default, PartialEq, serde::Serialize $(, $de)?)]
        $(#[$opt])*
        #[serde(default, rename_all = "camelCase")]
        pub struct Defaulted {
            #[agent_state(base)]
            #[serde(flatten)]
            pub base: agentstate::state::AgentState,
            pub order_id: String,
            pub item_count: u32,
            #[agent_state(skip)]
            #[serde(skip)]
            pub cache: u8,
        }

        /// No base, unknown keys refused.
        #[derive(AgentState, Debug, Clone, Default, PartialEq, serde::Serialize $(, $de)?)]
        $(#[$opt])*
        #[serde(deny_unknown_fields)]
        pub struct Plain {
            pub confirmed: bool,
            pub order_id: Option<String>,
        }

        /// A chain: `Top` extends `Mid`, which extends `AgentState`.
        #[derive(AgentState, Debug, Clone, Default, PartialEq, serde::Serialize $(, $de)?)]
        $(#[$opt])*
        #[agent_state(extensible)]
        pub struct Mid {
            #[agent_state(base)]
            #[serde(flatten)]
            pub base: agentstate::state::AgentState,
            pub confirmed: bool,
        }

        #[derive(AgentState, Debug, Clone, Default, PartialEq, serde::Serialize $(, $de)?)]
        $(#[$opt])*
        pub struct Top {
            #[agent_state(base)]
            #[serde(flatten)]
            pub mid: Mid,
            pub order_id: Option<String>,
        }
    };
}

#[allow(dead_code)] // the generated setter traits are not used here
mod opt_in {
    states!(#[agent_state(deserialize)];);
}

#[allow(dead_code)]
mod twin {
    states!(; serde::Deserialize);

    /// `agentstate::state::AgentState` as serde's derive reads it.
    #[derive(Debug, serde::Deserialize)]
    #[serde(default, rename = "AgentState")]
    pub struct AgentStateTwin {
        pub context: agentstate::MessageList,
        pub context_summary: Option<String>,
        #[serde(default)]
        pub context_summary_through: Option<agentstate::message::MessageId>,
        pub execution_meta: agentstate::state::ExecutionState,
    }

    impl Default for AgentStateTwin {
        fn default() -> Self {
            let base = agentstate::state::AgentState::default();
            AgentStateTwin {
                context: base.context,
                context_summary: base.context_summary,
                context_summary_through: base.context_summary_through,
                execution_meta: base.execution_meta,
            }
        }
    }
}

/// The error without serde_json's position.
fn unplaced(error: &serde_json::Error) -> String {
    let text = error.to_string();
    match text.rsplit_once(" at line ") {
        Some((message, _)) => message.to_owned(),
        None => text,
    }
}

/// How much of an error must be the same.
#[derive(Clone, Copy, PartialEq)]
enum Compare {
    /// Message and position.
    Placed,
    /// Message (serde's derive reports a flattened base's errors after reading the object).
    Message,
    /// That both fail: with two mistakes, one in each level of a chain, serde's derive reports
    /// the outer level's first, the opt-in the first in the input.
    Outcome,
}

/// Reads `json` as `O` (the opt-in) and as `T` (serde's derive) and asserts the same outcome:
/// equal values, or the same error as far as `compare` says.
fn same<O: DeserializeOwned + Debug, T: DeserializeOwned + Debug>(json: &str, compare: Compare) {
    let ours = serde_json::from_str::<O>(json);
    let serde = serde_json::from_str::<T>(json);
    match (&ours, &serde) {
        (Ok(a), Ok(b)) => assert_eq!(
            format!("{a:?}").replace("AgentStateTwin", "AgentState"),
            format!("{b:?}").replace("AgentStateTwin", "AgentState"),
            "{json}"
        ),
        (Err(a), Err(b)) => match compare {
            Compare::Placed => assert_eq!(a.to_string(), b.to_string(), "{json}"),
            Compare::Message => {
                let mut expected = unplaced(b);
                if expected.contains("raw JSON text") {
                    // serde's derive buffers a flattened base, and a value kept as raw JSON
                    // text cannot be read back from its buffer: the opt-in reads the base
                    // directly, and gives the base's own error.
                    let direct = serde_json::from_str::<twin::AgentStateTwin>(json).unwrap_err();
                    expected = unplaced(&direct);
                }
                assert_eq!(unplaced(a), expected, "{json}");
            }
            Compare::Outcome => {}
        },
        _ => panic!("{json}: the opt-in gives {ours:?}, serde's derive {serde:?}"),
    }
}

/// All the states, each against its twin; `chain` for the two-level chain.
fn same_everywhere(json: &str, one_level: Compare, chain: Compare) {
    same::<opt_in::Ext, twin::Ext>(json, one_level);
    same::<opt_in::Strict, twin::Strict>(json, one_level);
    same::<opt_in::Defaulted, twin::Defaulted>(json, one_level);
    same::<opt_in::Plain, twin::Plain>(json, one_level);
    same::<opt_in::Top, twin::Top>(json, chain);
    if !json.starts_with('{') {
        return; // serde's message names the twin's type
    }
    same::<agentstate::state::AgentState, twin::AgentStateTwin>(json, one_level);
}

const MESSAGES: &str = r#"[{"message_id":"m1","role":"user","content":[{"type":"text","text":"hi"}],"timestamp":1.5}]"#;

/// The keys of the states' own fields (all of them), and keys no state has.
const OWN_KEYS: &[&str] = &[
    "order_id",
    "confirmed",
    "n",
    "count",
    "tags",
    "level",
    "orderId",
    "itemCount",
];
const OTHER_KEYS: &[&str] = &["cache", "note", "extra", "Confirmed"];
const BASE_KEYS: &[&str] = &[
    "context",
    "context_summary",
    "context_summary_through",
    "execution_meta",
];
/// Values, each valid for some field and not for others.
const VALUES: &[&str] = &[
    "null", "true", "false", "3", "-1", "1.5", "\"o-1\"", "[\"a\"]", "[1]", "{}", "300",
];

fn valid_base_value(key: &str, pick: usize) -> String {
    let options: &[&str] = match key {
        "context" => &["[]", MESSAGES],
        "context_summary" => &["null", "\"a trip\""],
        "context_summary_through" => &["null", "\"m1\""],
        _ => &[r#"{"current_node":"tools","step":2}"#, "{}"],
    };
    options[pick % options.len()].to_owned()
}

fn object(entries: &[(String, String)]) -> String {
    let body: Vec<String> = entries
        .iter()
        .map(|(k, v)| format!("{}:{v}", serde_json::to_string(k).unwrap()))
        .collect();
    format!("{{{}}}", body.join(","))
}

/// Own and unknown keys with any values (missing, duplicate, ill-typed), base keys each at most
/// once with a valid value, in any order: every error is about the state's own keys, and
/// serde's derive reports it at the same place.
fn own_mistakes() -> impl Strategy<Value = String> {
    let entry = (0..4usize, 0..64usize, 0..64usize).prop_map(|(kind, key, value)| match kind {
        0 | 1 => (
            OWN_KEYS[key % OWN_KEYS.len()].to_owned(),
            VALUES[value % VALUES.len()].to_owned(),
        ),
        2 => (
            OTHER_KEYS[key % OTHER_KEYS.len()].to_owned(),
            VALUES[value % VALUES.len()].to_owned(),
        ),
        _ => {
            let k = BASE_KEYS[key % BASE_KEYS.len()];
            (k.to_owned(), valid_base_value(k, value))
        }
    });
    prop::collection::vec(entry, 0..10).prop_map(|entries| {
        let mut seen = Vec::new();
        let kept: Vec<(String, String)> = entries
            .into_iter()
            .filter(|(k, _)| {
                if !BASE_KEYS.contains(&k.as_str()) {
                    return true;
                }
                let first = !seen.contains(k);
                seen.push(k.clone());
                first
            })
            .collect();
        object(&kept)
    })
}

/// Every own key once with a valid value, and base and unknown keys with any values, repeated
/// or not: every error is about the base's keys (serde's derive reports those after reading
/// the whole object, so only the messages are compared).
fn base_mistakes() -> impl Strategy<Value = String> {
    let entry = (any::<bool>(), 0..64usize, 0..64usize, any::<bool>()).prop_map(
        |(base, key, value, valid)| {
            if base {
                let k = BASE_KEYS[key % BASE_KEYS.len()];
                let v = if valid {
                    valid_base_value(k, value)
                } else {
                    VALUES[value % VALUES.len()].to_owned()
                };
                (k.to_owned(), v)
            } else {
                (
                    OTHER_KEYS[key % OTHER_KEYS.len()].to_owned(),
                    VALUES[value % VALUES.len()].to_owned(),
                )
            }
        },
    );
    (prop::collection::vec(entry, 0..8), any::<u64>()).prop_map(|(mut entries, seed)| {
        // The own keys, valid for every state that has them, spread among the others.
        let own = [
            ("order_id", "\"o-1\""),
            ("confirmed", "true"),
            ("n", "3"),
            ("level", "2"),
            ("orderId", "\"o-2\""),
            ("itemCount", "4"),
        ];
        for (i, (k, v)) in own.iter().enumerate() {
            let at = (seed >> (i * 5)) as usize % (entries.len() + 1);
            entries.insert(at, ((*k).to_owned(), (*v).to_owned()));
        }
        object(&entries)
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn own_keys_read_as_serde_reads_them(json in own_mistakes()) {
        same_everywhere(&json, Compare::Placed, Compare::Outcome);
    }

    #[test]
    fn base_keys_read_as_serde_reads_them(json in base_mistakes()) {
        same_everywhere(&json, Compare::Message, Compare::Message);
    }
}

#[test]
fn hand_picked_inputs_read_as_serde_reads_them() {
    let cases = [
        "{}".to_owned(),
        r#"{"confirmed":true,"n":3}"#.to_owned(),
        // Base keys before, between and after the state's own.
        format!(
            r#"{{"context":{MESSAGES},"confirmed":true,"context_summary":"s","n":1,"execution_meta":{{"step":4}}}}"#
        ),
        format!(r#"{{"confirmed":false,"n":1,"context":{MESSAGES}}}"#),
        // Missing, duplicate, unknown, wrong type.
        r#"{"n":1}"#.to_owned(),
        r#"{"confirmed":true,"n":1,"confirmed":true}"#.to_owned(),
        r#"{"confirmed":true,"n":1,"extra":[1,{"a":null}]}"#.to_owned(),
        r#"{"confirmed":"yes","n":1}"#.to_owned(),
        r#"{"confirmed":true,"n":-1}"#.to_owned(),
        r#"{"confirmed":true,"n":1,"cache":5,"note":"x"}"#.to_owned(),
        r#"{"confirmed":true,"orderId":"a","itemCount":2}"#.to_owned(),
        // Not an object.
        "5".to_owned(),
        "null".to_owned(),
    ];
    for json in &cases {
        same_everywhere(json, Compare::Message, Compare::Message);
    }
}

#[test]
fn a_state_without_base_reads_an_array_of_its_values() {
    for json in [
        r#"[true, "o-1"]"#,
        "[false, null]",
        r#"[true, "o-1", 3]"#,
        r#"[1, "o"]"#,
    ] {
        same::<opt_in::Plain, twin::Plain>(json, Compare::Placed);
    }
    // A deliberate departure: a short array leaves fields missing, where serde's derive says
    // "invalid length".
    let err = serde_json::from_str::<opt_in::Plain>("[]").unwrap_err();
    assert!(
        err.to_string().starts_with("missing field `confirmed`"),
        "{err}"
    );
    let plain: opt_in::Plain = serde_json::from_str("[true]").unwrap();
    assert_eq!(plain.order_id, None);
    // A state with a base reads an object only, as serde's derive with a flattened field.
    same::<opt_in::Ext, twin::Ext>("[true]", Compare::Placed);
}

#[test]
fn wrong_types_and_unknown_keys_give_serdes_messages() {
    let err = serde_json::from_str::<opt_in::Ext>(r#"{"confirmed":"yes","n":1}"#).unwrap_err();
    assert_eq!(
        err.to_string(),
        "invalid type: string \"yes\", expected a boolean at line 1 column 18"
    );
    let err = serde_json::from_str::<opt_in::Strict>(r#"{"confirmed":true,"nope":1}"#).unwrap_err();
    assert!(err.to_string().starts_with("unknown field `nope`"), "{err}");
    let err = serde_json::from_str::<opt_in::Plain>(r#"{"nope":1}"#).unwrap_err();
    assert!(
        err.to_string()
            .starts_with("unknown field `nope`, expected `confirmed` or `order_id`"),
        "{err}"
    );
    let err = serde_json::from_str::<opt_in::Top>(r#"{"confirmed":true,"context":5}"#).unwrap_err();
    assert!(
        err.to_string()
            .starts_with("invalid type: integer `5`, expected a sequence"),
        "{err}"
    );
}

#[test]
fn a_chain_round_trips_through_json() {
    let mut top = opt_in::Top::default();
    top.mid.confirmed = true;
    top.order_id = Some("o-9".into());
    top.mid.base.context_summary = Some("summary".into());
    top.mid.base.execution_meta.step = 3;
    let json = serde_json::to_string(&top).unwrap();
    let back: opt_in::Top = serde_json::from_str(&json).unwrap();
    assert_eq!(back, top);
    // From a `Value` too (owned keys), and the missing field of the middle state.
    let back: opt_in::Top = serde_json::from_value(serde_json::to_value(&top).unwrap()).unwrap();
    assert_eq!(back, top);
    let err = serde_json::from_str::<opt_in::Top>(r#"{"order_id":null}"#).unwrap_err();
    assert!(
        err.to_string().starts_with("missing field `confirmed`"),
        "{err}"
    );
}

#[test]
fn skipped_fields_take_their_defaults() {
    let ext: opt_in::Ext =
        serde_json::from_str(r#"{"confirmed":true,"n":1,"cache":9,"note":"x"}"#).unwrap();
    assert_eq!((ext.cache, ext.note.as_str(), ext.level), (0, "", 7));
    let defaulted: opt_in::Defaulted = serde_json::from_str("{}").unwrap();
    assert_eq!(defaulted, opt_in::Defaulted::default());
}

#[test]
fn the_opt_in_keeps_a_base_messages_free_form_values_exact() {
    // A message as AgentFlow dumps it: metadata keys unsorted, an integer beyond 64 bits.
    let message = r#"{"message_id":"m-1","role":"user","content":[{"type":"text","text":"hi","annotations":[]}],"delta":false,"tools_calls":null,"reasoning":null,"timestamp":1760000000.5,"metadata":{"zeta":1,"alpha":123456789012345678901234567890},"usages":null,"raw":null,"parsed_content":null}"#;
    let json = format!(r#"{{"context":[{message}],"confirmed":true,"n":2}}"#);
    let ext: opt_in::Ext = serde_json::from_str(&json).unwrap();
    let written = serde_json::to_string(&ext.base.context[0]).unwrap();
    assert_eq!(
        written, message,
        "read key by key, the base's values keep their text"
    );
    // serde's flatten buffers the base first: the key order survives, the big integer does not.
    let twin: twin::Ext = serde_json::from_str(&json).unwrap();
    let buffered = serde_json::to_string(&twin.base.context[0]).unwrap();
    assert_ne!(buffered, message);
}
