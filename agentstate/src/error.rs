//! Errors of agentstate, each in one of the four OpenArmature categories.

use std::fmt;
use std::sync::Arc;

/// The cause of an error: a source error shared cheaply between clones of the error.
pub type Cause = Arc<dyn std::error::Error + Send + Sync + 'static>;

/// Every error agentstate reports. [`Error::category`] gives its OpenArmature category name.
///
/// Configuration errors (`conflicting_reducers`, `reducer_configuration_invalid`) happen when a
/// schema or a reducer is built, before any update is merged. Merge errors (`reducer_error`,
/// `state_validation_error`) happen while an update is merged; a merge that fails leaves the state
/// exactly as it was, so the state before the merge is simply the state you still hold.
///
/// ```
/// use agentstate::reducers::BoundedAppend;
///
/// let err = BoundedAppend::new(0).unwrap_err();
/// assert_eq!(err.category(), "reducer_configuration_invalid");
/// assert_eq!(
///     err.to_string(),
///     "reducer `bounded_append` is misconfigured: max_len must be at least 1, got 0"
/// );
/// ```
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// More than one reducer was declared for one field (`conflicting_reducers`).
    #[error(
        "field `{field}` declares more than one reducer ({}); a field takes exactly one",
        .reducers.join(", ")
    )]
    ConflictingReducers {
        /// The field that was declared with several reducers.
        field: String,
        /// The reducers that were declared, in declaration order.
        reducers: Vec<String>,
    },

    /// A reducer was given parameters it cannot work with (`reducer_configuration_invalid`).
    #[error("reducer `{reducer}` is misconfigured{}: {reason}", field_suffix(.field))]
    ReducerConfigurationInvalid {
        /// The field the reducer was declared on, when it is known.
        field: Option<String>,
        /// The reducer's name, e.g. `bounded_append`.
        reducer: String,
        /// What was wrong, e.g. `max_len must be at least 1, got 0`.
        reason: String,
    },

    /// A reducer failed while merging an update into a field (`reducer_error`).
    #[error("reducer `{reducer}` failed on field `{field}`{}: {cause}", node_suffix(.node))]
    Reducer {
        /// The field being merged.
        field: String,
        /// The reducer's name.
        reducer: String,
        /// The node that produced the update, when the caller named it.
        node: Option<String>,
        /// Why the reducer failed.
        #[source]
        cause: Cause,
    },

    /// A value does not fit the state's schema, or an update names a field the state does not
    /// have (`state_validation_error`).
    #[error("field `{field}` {reason}")]
    StateValidation {
        /// The field (or update key) that is wrong.
        field: String,
        /// What is wrong with it, as the rest of a sentence that starts with the field name.
        reason: String,
    },
}

fn field_suffix(field: &Option<String>) -> String {
    field
        .as_ref()
        .map(|f| format!(" for field `{f}`"))
        .unwrap_or_default()
}

fn node_suffix(node: &Option<String>) -> String {
    node.as_ref()
        .map(|n| format!(" (update from node `{n}`)"))
        .unwrap_or_default()
}

impl Error {
    /// The OpenArmature name of this error's category: `conflicting_reducers`,
    /// `reducer_configuration_invalid`, `reducer_error` or `state_validation_error`.
    pub fn category(&self) -> &'static str {
        match self {
            Error::ConflictingReducers { .. } => "conflicting_reducers",
            Error::ReducerConfigurationInvalid { .. } => "reducer_configuration_invalid",
            Error::Reducer { .. } => "reducer_error",
            Error::StateValidation { .. } => "state_validation_error",
        }
    }

    /// Whether this error is raised when a schema or reducer is configured (as opposed to when an
    /// update is merged).
    pub fn is_configuration_error(&self) -> bool {
        matches!(
            self,
            Error::ConflictingReducers { .. } | Error::ReducerConfigurationInvalid { .. }
        )
    }

    /// The field this error is about, when there is one.
    pub fn field(&self) -> Option<&str> {
        match self {
            Error::ConflictingReducers { field, .. }
            | Error::Reducer { field, .. }
            | Error::StateValidation { field, .. } => Some(field),
            Error::ReducerConfigurationInvalid { field, .. } => field.as_deref(),
        }
    }

    /// A `reducer_configuration_invalid` error with no field attached yet.
    pub fn configuration(reducer: impl Into<String>, reason: impl Into<String>) -> Self {
        Error::ReducerConfigurationInvalid {
            field: None,
            reducer: reducer.into(),
            reason: reason.into(),
        }
    }

    /// A `state_validation_error` about `field`; `reason` continues a sentence that starts with
    /// the field's name (`"expects a list, got a string"`).
    pub fn validation(field: impl Into<String>, reason: impl Into<String>) -> Self {
        Error::StateValidation {
            field: field.into(),
            reason: reason.into(),
        }
    }

    /// Attaches a field name to a configuration error that has none; other errors are returned
    /// unchanged.
    pub fn for_field(self, name: &str) -> Self {
        match self {
            Error::ReducerConfigurationInvalid {
                field: None,
                reducer,
                reason,
            } => Error::ReducerConfigurationInvalid {
                field: Some(name.to_owned()),
                reducer,
                reason,
            },
            other => other,
        }
    }

    /// Prefixes the field this error is about with `outer.`, for errors of a nested state.
    pub fn nested_in(self, outer: &str) -> Self {
        let prefix = |field: String| format!("{outer}.{field}");
        match self {
            Error::ConflictingReducers { field, reducers } => Error::ConflictingReducers {
                field: prefix(field),
                reducers,
            },
            Error::ReducerConfigurationInvalid {
                field,
                reducer,
                reason,
            } => Error::ReducerConfigurationInvalid {
                field: Some(field.map_or_else(|| outer.to_owned(), prefix)),
                reducer,
                reason,
            },
            Error::Reducer {
                field,
                reducer,
                node,
                cause,
            } => Error::Reducer {
                field: prefix(field),
                reducer,
                node,
                cause,
            },
            Error::StateValidation { field, reason } => Error::StateValidation {
                field: prefix(field),
                reason,
            },
        }
    }

    /// Records the node that produced the failing update on a `reducer_error`; other errors are
    /// returned unchanged.
    pub fn from_node(self, name: &str) -> Self {
        match self {
            Error::Reducer {
                field,
                reducer,
                cause,
                ..
            } => Error::Reducer {
                field,
                reducer,
                node: Some(name.to_owned()),
                cause,
            },
            other => other,
        }
    }
}

/// Why a reducer could not merge an update, before the field it ran on is known.
///
/// Reducers return this; the state's merge attaches the field and reducer names and reports an
/// [`Error::Reducer`] (category `reducer_error`).
#[derive(Debug, Clone)]
pub struct ReduceError {
    cause: Cause,
}

impl ReduceError {
    /// A reducer failure described by a message.
    pub fn msg(message: impl Into<String>) -> Self {
        ReduceError {
            cause: Arc::new(Message(message.into())),
        }
    }

    /// A reducer failure caused by another error (for example one returned by a user reducer).
    pub fn new(cause: impl Into<Box<dyn std::error::Error + Send + Sync + 'static>>) -> Self {
        ReduceError {
            cause: Arc::from(cause.into()),
        }
    }

    /// The underlying cause.
    pub fn cause(&self) -> &Cause {
        &self.cause
    }

    /// Turns this into a `reducer_error` about `field`, merged with the reducer `reducer`.
    pub fn into_error(self, field: &str, reducer: &str) -> Error {
        Error::Reducer {
            field: field.to_owned(),
            reducer: reducer.to_owned(),
            node: None,
            cause: self.cause,
        }
    }
}

impl fmt::Display for ReduceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.cause, f)
    }
}

impl std::error::Error for ReduceError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.cause.source()
    }
}

/// A plain-text error message used as the cause of reducer failures.
#[derive(Debug)]
struct Message(String);

impl fmt::Display for Message {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Message {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn categories_are_the_openarmature_names() {
        let errors = [
            Error::ConflictingReducers {
                field: "v".into(),
                reducers: vec!["append".into(), "last_write_wins".into()],
            },
            Error::configuration("bounded_append", "max_len must be at least 1, got 0"),
            ReduceError::msg("expected a list").into_error("items", "append"),
            Error::validation("count", "expects an integer, got a string"),
        ];
        let categories: Vec<_> = errors.iter().map(Error::category).collect();
        assert_eq!(
            categories,
            [
                "conflicting_reducers",
                "reducer_configuration_invalid",
                "reducer_error",
                "state_validation_error"
            ]
        );
        assert!(errors[0].is_configuration_error() && errors[1].is_configuration_error());
        assert!(!errors[2].is_configuration_error() && !errors[3].is_configuration_error());
    }

    #[test]
    fn messages_name_the_field_and_what_was_wrong() {
        let conflicting = Error::ConflictingReducers {
            field: "v".into(),
            reducers: vec!["append".into(), "last_write_wins".into()],
        };
        assert_eq!(
            conflicting.to_string(),
            "field `v` declares more than one reducer (append, last_write_wins); a field takes exactly one"
        );
        let config = Error::configuration("bounded_append", "max_len must be at least 1, got 0")
            .for_field("items");
        assert_eq!(
            config.to_string(),
            "reducer `bounded_append` is misconfigured for field `items`: max_len must be at least 1, got 0"
        );
        let reducer = ReduceError::msg("expected a list, got a string")
            .into_error("items", "bounded_append")
            .from_node("x");
        assert_eq!(
            reducer.to_string(),
            "reducer `bounded_append` failed on field `items` (update from node `x`): expected a list, got a string"
        );
        assert_eq!(reducer.field(), Some("items"));
        let validation = Error::validation("count", "expects an integer, got \"three\"");
        assert_eq!(
            validation.to_string(),
            "field `count` expects an integer, got \"three\""
        );
    }

    #[test]
    fn reduce_error_keeps_its_source() {
        let io = std::io::Error::other("disk on fire");
        let err = ReduceError::new(io).into_error("notes", "my_reducer");
        assert_eq!(
            err.to_string(),
            "reducer `my_reducer` failed on field `notes`: disk on fire"
        );
        let source = std::error::Error::source(&err).expect("a source");
        assert_eq!(source.to_string(), "disk on fire");
    }
}

/// The candidate closest to `name` by edit distance, when it is close enough to be a likely
/// typo (at most a third of the name's length, and at least one edit allowed): the "did you
/// mean" of this crate's errors, and of the graph runner's.
///
/// ```
/// use agentstate::did_you_mean;
///
/// let fields = ["messages", "notes", "merged"];
/// assert_eq!(did_you_mean("mesages", fields.into_iter()), Some("messages"));
/// assert_eq!(did_you_mean("mrege", ["merge"].into_iter()), Some("merge")); // a swap is one edit
/// assert_eq!(did_you_mean("title", fields.into_iter()), None);
/// ```
pub fn did_you_mean<'a>(name: &str, candidates: impl Iterator<Item = &'a str>) -> Option<&'a str> {
    let limit = (name.chars().count() / 3).max(1);
    candidates
        .map(|c| (edit_distance(name, c), c))
        .filter(|&(d, _)| d <= limit)
        .min_by_key(|&(d, _)| d)
        .map(|(_, c)| c)
}

/// Edit distance between two strings, by characters, where swapping two neighbours is one edit
/// (optimal string alignment), so `mrege` is one edit from `merge`.
fn edit_distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    let width = b.len() + 1;
    let mut d = vec![0usize; (a.len() + 1) * width];
    for i in 0..=a.len() {
        d[i * width] = i;
    }
    for (j, cell) in d.iter_mut().enumerate().take(width) {
        *cell = j;
    }
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut best = (d[(i - 1) * width + j] + 1)
                .min(d[i * width + j - 1] + 1)
                .min(d[(i - 1) * width + j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                best = best.min(d[(i - 2) * width + j - 2] + 1);
            }
            d[i * width + j] = best;
        }
    }
    d[a.len() * width + b.len()]
}

#[cfg(test)]
mod suggestion_tests {
    use super::*;

    #[test]
    fn suggests_close_names_only() {
        let names = ["append", "merge", "merge_all", "bounded_append"];
        assert_eq!(did_you_mean("apend", names.into_iter()), Some("append"));
        assert_eq!(
            did_you_mean("bounded_apend", names.into_iter()),
            Some("bounded_append")
        );
        assert_eq!(did_you_mean("mrege", names.into_iter()), Some("merge"));
        assert_eq!(did_you_mean("zzzzzz", names.into_iter()), None);
        assert_eq!(edit_distance("kitten", "sitting"), 3);
        assert_eq!(edit_distance("itmes", "items"), 1);
    }
}
