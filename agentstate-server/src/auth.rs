//! Users kept apart, as LangGraph's custom auth keeps them: who a request comes from
//! ([`Authenticate`] turns its headers, method and path into an [`Identity`], or refuses it), and
//! what that user may do to what ([`Authorize`]: for each [`Access`], a resource and an action, a
//! [`Decision`]: allowed, refused, or allowed on what a [`Filter`] of metadata matches; on a
//! creation or an update, the rule may stamp the metadata written, as LangGraph's handlers stamp
//! `value["metadata"]`). The default rule is [`OwnerOnly`].

use crate::assistant::BoxFuture;
use crate::error::ApiError;
use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use axum::http::StatusCode;
use serde_json::{Map, Value};
use std::future::Future;
use std::sync::Arc;

/// The metadata key [`OwnerOnly`] stamps with its creator's identity (LangGraph's examples'
/// `owner`).
pub const OWNER: &str = "owner";

/// Who a request comes from, as an [`Authenticate`] hook finds it (LangGraph's
/// `MinimalUserDict`): its `identity`, a display name, permissions, and any other fields the
/// rules or the graph want (an organisation, roles).
///
/// ```
/// use agentstate_server::Identity;
/// use serde_json::json;
///
/// let alice = Identity::new("alice")
///     .with_display_name("Alice")
///     .with_permission("threads:write")
///     .with_field("org", json!("acme"));
/// assert_eq!(
///     alice.to_json(),
///     json!({
///         "identity": "alice",
///         "display_name": "Alice",
///         "is_authenticated": true,
///         "permissions": ["threads:write"],
///         "org": "acme",
///     })
/// );
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct Identity {
    /// The user's unique id (what [`OwnerOnly`] stamps as the owner).
    pub identity: String,
    /// A name to show (the identity if none).
    pub display_name: Option<String>,
    /// What the user may do, as the application names it (`ctx.permissions` in LangGraph).
    pub permissions: Vec<String>,
    /// Any other fields, shown beside the others in [`to_json`](Identity::to_json).
    pub fields: Map<String, Value>,
}

impl Identity {
    /// User `identity`, with no display name, permissions or other fields.
    pub fn new(identity: impl Into<String>) -> Self {
        Identity {
            identity: identity.into(),
            display_name: None,
            permissions: Vec::new(),
            fields: Map::new(),
        }
    }

    /// With `name` as its display name.
    #[must_use]
    pub fn with_display_name(mut self, name: impl Into<String>) -> Self {
        self.display_name = Some(name.into());
        self
    }

    /// With `permission` among its permissions.
    #[must_use]
    pub fn with_permission(mut self, permission: impl Into<String>) -> Self {
        self.permissions.push(permission.into());
        self
    }

    /// With field `key` set to `value` (one of `identity`, `display_name`, `is_authenticated`
    /// and `permissions` is shown as the identity has it, not as this field).
    #[must_use]
    pub fn with_field(mut self, key: impl Into<String>, value: Value) -> Self {
        self.fields.insert(key.into(), value);
        self
    }

    /// The user as LangGraph shows it (`langgraph_auth_user` in a run's `configurable`): its
    /// fields, then `identity`, `display_name` (the identity if none), `is_authenticated` and
    /// `permissions`.
    pub fn to_json(&self) -> Value {
        let mut json = self.fields.clone();
        json.insert("identity".into(), Value::from(self.identity.as_str()));
        let name = self.display_name.as_deref().unwrap_or(&self.identity);
        json.insert("display_name".into(), Value::from(name));
        json.insert("is_authenticated".into(), Value::Bool(true));
        json.insert("permissions".into(), Value::from(self.permissions.clone()));
        Value::Object(json)
    }
}

/// Finds who a request comes from (LangGraph's `@auth.authenticate`): from its parts (method,
/// path, headers), an [`Identity`], or a refusal (an [`ApiError`], 401 as
/// [`ApiError::unauthorized`] makes it; its body `{"detail": ...}`, as LangGraph's).
///
/// Implemented for [`BearerTokens`], and for every closure that takes the request's parts and
/// gives a future of the answer (which owns what it reads of them):
///
/// ```
/// use agentstate_server::{ApiError, Identity, Server};
/// use axum::http::request::Parts;
///
/// # fn run(graph: agentstate_graph::Graph<agentstate::state::AgentState>) -> Result<(), Box<dyn std::error::Error>> {
/// # let store = agentstate_store::SqliteStore::open_in_memory()?;
/// let server = Server::builder(&store)
///     .assistant("agent", graph.durable(&store))
///     .authenticate(|parts: &Parts| {
///         let user = parts.headers.get("x-user").and_then(|v| v.to_str().ok()).map(str::to_owned);
///         async move {
///             // A real check asks an identity provider here.
///             user.map(Identity::new)
///                 .ok_or_else(|| ApiError::unauthorized("the request carries no `x-user` header"))
///         }
///     })
///     .build();
/// # let _ = server;
/// # Ok(())
/// # }
/// ```
pub trait Authenticate: Send + Sync + 'static {
    /// Who the request of `parts` comes from, or why it is refused.
    fn authenticate<'a>(&'a self, parts: &'a Parts) -> BoxFuture<'a, Result<Identity, ApiError>>;
}

impl<F, Fut> Authenticate for F
where
    F: Fn(&Parts) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<Identity, ApiError>> + Send + 'static,
{
    fn authenticate<'a>(&'a self, parts: &'a Parts) -> BoxFuture<'a, Result<Identity, ApiError>> {
        Box::pin(self(parts))
    }
}

/// An [`Authenticate`] hook of fixed bearer tokens: a request whose `Authorization` header is
/// `Bearer <token>` with one of them is its user's (tokens compared in constant time); any
/// other is refused (401).
///
/// ```
/// use agentstate_server::{BearerTokens, Identity, Server};
///
/// # fn run(graph: agentstate_graph::Graph<agentstate::state::AgentState>) -> Result<(), Box<dyn std::error::Error>> {
/// # let store = agentstate_store::SqliteStore::open_in_memory()?;
/// let server = Server::builder(&store)
///     .assistant("agent", graph.durable(&store))
///     .authenticate(
///         BearerTokens::new()
///             .token("token-alice", Identity::new("alice"))
///             .token("token-bob", Identity::new("bob")),
///     )
///     .build();
/// # let _ = server;
/// # Ok(())
/// # }
/// ```
#[derive(Clone, Default)]
pub struct BearerTokens {
    tokens: Vec<(String, Identity)>,
}

/// The users, not their tokens (a log of the server's configuration shows no secret).
impl std::fmt::Debug for BearerTokens {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let users: Vec<&str> = self
            .tokens
            .iter()
            .map(|(_, u)| u.identity.as_str())
            .collect();
        f.debug_struct("BearerTokens")
            .field("users", &users)
            .finish()
    }
}

impl BearerTokens {
    /// No token yet (every request is refused).
    pub fn new() -> Self {
        BearerTokens::default()
    }

    /// With `token` for `user` (an empty token matches no request).
    #[must_use]
    pub fn token(mut self, token: impl Into<String>, user: Identity) -> Self {
        self.tokens.push((token.into(), user));
        self
    }

    /// The user of bearer token `given`, if any (every token compared, in constant time).
    fn user(&self, given: &[u8]) -> Option<&Identity> {
        use subtle::ConstantTimeEq;
        let mut found = None;
        for (token, user) in &self.tokens {
            if bool::from(token.as_bytes().ct_eq(given)) && !given.is_empty() {
                found = Some(user);
            }
        }
        found
    }
}

impl Authenticate for BearerTokens {
    fn authenticate<'a>(&'a self, parts: &'a Parts) -> BoxFuture<'a, Result<Identity, ApiError>> {
        let path = parts.uri.path();
        let header = parts.headers.get(axum::http::header::AUTHORIZATION);
        let answer = match header.map(|h| bearer(h.as_bytes())) {
            None => Err(format!(
                "the request to `{path}` carries no `Authorization` header (`Bearer <token>`)"
            )),
            Some(None) => Err(format!(
                "the request to `{path}` carries an `Authorization` header that is no bearer token (`Bearer <token>`)"
            )),
            Some(Some(token)) => self.user(token).cloned().ok_or_else(|| {
                format!("the request to `{path}` carries a bearer token that is no user's")
            }),
        };
        Box::pin(std::future::ready(answer.map_err(ApiError::unauthorized)))
    }
}

/// The token of an `Authorization` header `Bearer <token>` (the scheme in any case).
fn bearer(header: &[u8]) -> Option<&[u8]> {
    let scheme = header.get(..7)?;
    scheme
        .eq_ignore_ascii_case(b"bearer ")
        .then(|| header[7..].trim_ascii())
}

/// What a rule is asked about (LangGraph's `AuthContext` with the resource's id).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Resource {
    /// Threads, and their runs, state and history (a run is its thread's: reading, joining,
    /// streaming, cancelling or deleting a run is reading, updating or deleting its thread).
    Threads,
    /// Assistants (those of the served graphs are `created_by: system`).
    Assistants,
    /// Crons (not served yet).
    Crons,
    /// The store's items (not served yet).
    Store,
}

impl Resource {
    /// Its name, as LangGraph's (`threads`, `assistants`, `crons`, `store`).
    pub fn name(self) -> &'static str {
        match self {
            Resource::Threads => "threads",
            Resource::Assistants => "assistants",
            Resource::Crons => "crons",
            Resource::Store => "store",
        }
    }
}

/// What is done to a [`Resource`] (LangGraph's actions).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Action {
    /// Made (its metadata is what the rule may stamp).
    Create,
    /// Read: one, its state, history, runs, a run, a run's stream or result.
    Read,
    /// Changed: its metadata (what the rule may stamp is the patch), its state, a run
    /// cancelled.
    Update,
    /// Deleted (a thread, or one of its runs).
    Delete,
    /// Searched or counted: the rule's filter keeps what is found.
    Search,
    /// A run created on a thread (its metadata is what the rule may stamp; a thread the run
    /// creates is given it too).
    CreateRun,
    /// A store item written.
    Put,
    /// A store item read.
    Get,
    /// The store's namespaces listed.
    ListNamespaces,
}

impl Action {
    /// Its name, as LangGraph's (`create`, `read`, `update`, `delete`, `search`,
    /// `create_run`, `put`, `get`, `list_namespaces`).
    pub fn name(self) -> &'static str {
        match self {
            Action::Create => "create",
            Action::Read => "read",
            Action::Update => "update",
            Action::Delete => "delete",
            Action::Search => "search",
            Action::CreateRun => "create_run",
            Action::Put => "put",
            Action::Get => "get",
            Action::ListNamespaces => "list_namespaces",
        }
    }
}

/// What a request asks of a rule: its user, the resource, the action, and the resource's id
/// when it names one.
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct Access<'a> {
    /// Who asks.
    pub user: &'a Identity,
    /// What of.
    pub resource: Resource,
    /// What it does.
    pub action: Action,
    /// The thread's or assistant's id, when the request names one.
    pub id: Option<&'a str>,
}

impl<'a> Access<'a> {
    /// `user` doing `action` to `resource` (`id`: the one named).
    pub fn new(
        user: &'a Identity,
        resource: Resource,
        action: Action,
        id: Option<&'a str>,
    ) -> Self {
        Access {
            user,
            resource,
            action,
            id,
        }
    }
}

/// A rule's answer (LangGraph's handler results: `None`/`True`, `False`, a filter dict).
#[derive(Debug, Clone, PartialEq)]
pub enum Decision {
    /// Allowed, on anything.
    Allow,
    /// Refused: 403, saying who may not do what.
    Deny,
    /// Allowed on what the filter matches (by its metadata); anything else is hidden: read,
    /// changed or deleted, it is answered as missing (404); searched, it is left out.
    Only(Filter),
}

/// Conditions on a resource's metadata, all of which must hold (LangGraph's filter dicts:
/// `{"owner": "alice"}`, `$eq`, `$contains`, `$or`).
///
/// ```
/// use agentstate_server::Filter;
/// use serde_json::json;
///
/// let mine = Filter::new().equals("owner", json!("alice"));
/// let shared = Filter::new().contains("readers", json!("alice"));
/// let either = Filter::any_of([mine, shared]);
/// let metadata = |v: serde_json::Value| v.as_object().cloned().unwrap();
/// assert!(either.matches(&metadata(json!({"owner": "alice"}))));
/// assert!(either.matches(&metadata(json!({"owner": "bob", "readers": ["alice"]}))));
/// assert!(!either.matches(&metadata(json!({"owner": "bob"}))));
/// ```
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Filter {
    conditions: Vec<Condition>,
}

/// One condition of a [`Filter`].
#[derive(Debug, Clone, PartialEq)]
enum Condition {
    /// The key's value is this one.
    Eq(String, Value),
    /// The key's value is a list holding this value (every one of them, for a list).
    Contains(String, Value),
    /// One of these filters matches.
    AnyOf(Vec<Filter>),
}

impl Filter {
    /// A filter that matches everything (no condition yet).
    pub fn new() -> Self {
        Filter::default()
    }

    /// And metadata key `key` holds `value` (`$eq`).
    #[must_use]
    pub fn equals(mut self, key: impl Into<String>, value: Value) -> Self {
        self.conditions.push(Condition::Eq(key.into(), value));
        self
    }

    /// And metadata key `key` holds a list with `value` in it, or, `value` being a list, with
    /// each of its items (`$contains`).
    #[must_use]
    pub fn contains(mut self, key: impl Into<String>, value: Value) -> Self {
        self.conditions.push(Condition::Contains(key.into(), value));
        self
    }

    /// A filter that matches what one of `filters` matches (`$or`; none: nothing).
    pub fn any_of(filters: impl IntoIterator<Item = Filter>) -> Self {
        Filter {
            conditions: vec![Condition::AnyOf(filters.into_iter().collect())],
        }
    }

    /// Whether `metadata` meets every condition.
    pub fn matches(&self, metadata: &Map<String, Value>) -> bool {
        self.conditions.iter().all(|condition| match condition {
            Condition::Eq(key, value) => metadata.get(key) == Some(value),
            Condition::Contains(key, value) => match (metadata.get(key), value) {
                (Some(Value::Array(held)), Value::Array(wanted)) => {
                    wanted.iter().all(|w| held.contains(w))
                }
                (Some(Value::Array(held)), one) => held.contains(one),
                _ => false,
            },
            Condition::AnyOf(filters) => filters.iter().any(|f| f.matches(metadata)),
        })
    }
}

/// What a user may do to what (LangGraph's `@auth.on` handlers): for an [`Access`], a
/// [`Decision`]. On a creation (`Create`, `CreateRun`, `Put`) `metadata` is the metadata the
/// new thread, run or item gets, and on an `Update` the metadata a patch merges: the rule may
/// stamp it (an owner); on other actions it is a scratch map. A rule decides from the user
/// (what [`Authenticate`] found, fields included) without I/O, once per request.
///
/// Implemented for [`OwnerOnly`] (the default) and for closures; a rule of one's own can
/// defer to [`OwnerOnly`] for what it does not decide:
///
/// ```
/// use agentstate_server::{Access, Action, Authorize, Decision, OwnerOnly, Resource};
/// use serde_json::{Map, Value};
///
/// // Admins see everything; the others, their own.
/// let rule = |access: &Access<'_>, metadata: &mut Map<String, Value>| {
///     if access.user.permissions.iter().any(|p| p == "admin") {
///         return Decision::Allow;
///     }
///     if access.resource == Resource::Threads && access.action == Action::Delete {
///         return Decision::Deny;
///     }
///     OwnerOnly.authorize(access, metadata)
/// };
/// # let _ = rule;
/// ```
pub trait Authorize: Send + Sync + 'static {
    /// What `access.user` may do (see the trait's docs for `metadata`).
    fn authorize(&self, access: &Access<'_>, metadata: &mut Map<String, Value>) -> Decision;
}

impl<F> Authorize for F
where
    F: Fn(&Access<'_>, &mut Map<String, Value>) -> Decision + Send + Sync + 'static,
{
    fn authorize(&self, access: &Access<'_>, metadata: &mut Map<String, Value>) -> Decision {
        self(access, metadata)
    }
}

/// The default rule once the server authenticates: a user's resources are their own. What a
/// user creates (a thread, a run, a thread a run creates, a copy, a store item) is stamped
/// with [`OWNER`] = their identity (a patch too: the owner is not changed by one), and every
/// other action is allowed only on what they own; the assistants of the served graphs
/// (`created_by: system`) are read and searched by everyone.
#[derive(Debug, Clone, Copy, Default)]
pub struct OwnerOnly;

impl Authorize for OwnerOnly {
    fn authorize(&self, access: &Access<'_>, metadata: &mut Map<String, Value>) -> Decision {
        let identity = access.user.identity.as_str();
        let mine = Filter::new().equals(OWNER, Value::from(identity));
        match access.action {
            Action::Read | Action::Search if access.resource == Resource::Assistants => {
                let system = Filter::new().equals("created_by", Value::from("system"));
                Decision::Only(Filter::any_of([mine, system]))
            }
            Action::Create | Action::CreateRun | Action::Update | Action::Put => {
                metadata.insert(OWNER.into(), Value::from(identity));
                Decision::Only(mine)
            }
            _ => Decision::Only(mine),
        }
    }
}

/// Who a request comes from and the rules over them, as the server's authentication put them
/// in its extensions; no user when the server does not authenticate (everything allowed).
#[derive(Clone, Default)]
pub(crate) struct Caller(Option<Arc<Authenticated>>);

/// An authenticated user and the rules over them.
pub(crate) struct Authenticated {
    pub(crate) user: Identity,
    pub(crate) rules: Arc<dyn Authorize>,
}

impl Caller {
    /// The caller `user`, under `rules`.
    pub(crate) fn new(user: Identity, rules: Arc<dyn Authorize>) -> Self {
        Caller(Some(Arc::new(Authenticated { user, rules })))
    }

    /// The user, if the server authenticates.
    pub(crate) fn user(&self) -> Option<&Identity> {
        self.0.as_ref().map(|a| &a.user)
    }

    /// What the rules decide of `action` on `resource` (`id`: the one named; `metadata`: see
    /// [`Authorize`]): `None` allowed, a filter the resource's metadata must match, or refused
    /// (403).
    pub(crate) fn decide(
        &self,
        resource: Resource,
        action: Action,
        id: Option<&str>,
        metadata: &mut Map<String, Value>,
    ) -> Result<Option<Filter>, ApiError> {
        let Some(auth) = &self.0 else {
            return Ok(None);
        };
        let access = Access::new(&auth.user, resource, action, id);
        match auth.rules.authorize(&access, metadata) {
            Decision::Allow => Ok(None),
            Decision::Only(filter) => Ok(Some(filter)),
            Decision::Deny => {
                let what = match id {
                    Some(id) => format!(" (`{id}`)"),
                    None => String::new(),
                };
                Err(ApiError::new(
                    StatusCode::FORBIDDEN,
                    format!(
                        "user `{}` may not {} {}{what}",
                        auth.user.identity,
                        action.name(),
                        resource.name()
                    ),
                ))
            }
        }
    }

    /// Whether the rules let the caller `action` the resource of `resource` `id` whose metadata
    /// is `metadata` (false: it is hidden), or refuse it (403).
    pub(crate) fn sees(
        &self,
        resource: Resource,
        action: Action,
        id: &str,
        metadata: &Map<String, Value>,
    ) -> Result<bool, ApiError> {
        let filter = self.decide(resource, action, Some(id), &mut Map::new())?;
        Ok(filter.is_none_or(|f| f.matches(metadata)))
    }
}

impl<S: Send + Sync> FromRequestParts<S> for Caller {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        Ok(parts
            .extensions
            .get::<Caller>()
            .cloned()
            .unwrap_or_default())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn parts(authorization: Option<&str>) -> Parts {
        let mut request = axum::http::Request::builder().uri("/threads");
        if let Some(value) = authorization {
            request = request.header("authorization", value);
        }
        request.body(()).unwrap().into_parts().0
    }

    #[tokio::test]
    async fn bearer_tokens_find_their_user_and_refuse_the_rest() {
        let tokens = BearerTokens::new()
            .token("t-alice", Identity::new("alice"))
            .token("", Identity::new("nobody"));
        assert_eq!(
            format!("{tokens:?}"),
            r#"BearerTokens { users: ["alice", "nobody"] }"#
        );
        let user = tokens.authenticate(&parts(Some("Bearer t-alice"))).await;
        assert_eq!(user.unwrap().identity, "alice");
        let user = tokens.authenticate(&parts(Some("bearer  t-alice "))).await;
        assert_eq!(user.unwrap().identity, "alice");
        for header in [
            None,
            Some("Basic t-alice"),
            Some("Bearer t-bob"),
            Some("Bearer "),
            Some("Bearer"),
        ] {
            let refused = tokens.authenticate(&parts(header)).await.unwrap_err();
            assert_eq!(refused.status(), StatusCode::UNAUTHORIZED, "{header:?}");
            assert!(refused.to_string().contains("`/threads`"), "{refused}");
        }
    }

    #[test]
    fn owner_only_stamps_creations_and_patches_and_filters_the_rest() {
        let alice = Identity::new("alice");
        let mut metadata = Map::new();
        metadata.insert(OWNER.into(), json!("bob"));
        let access = Access::new(&alice, Resource::Threads, Action::Update, Some("t"));
        let decision = OwnerOnly.authorize(&access, &mut metadata);
        assert_eq!(metadata[OWNER], json!("alice"));
        let Decision::Only(filter) = decision else {
            panic!("{decision:?}")
        };
        assert!(filter.matches(&metadata));
        let bobs = json!({"owner": "bob"}).as_object().cloned().unwrap();
        assert!(!filter.matches(&bobs));
        let system = json!({"created_by": "system"})
            .as_object()
            .cloned()
            .unwrap();
        let read = Access::new(&alice, Resource::Assistants, Action::Search, None);
        let Decision::Only(filter) = OwnerOnly.authorize(&read, &mut Map::new()) else {
            panic!("assistants are filtered")
        };
        assert!(filter.matches(&system) && !filter.matches(&bobs));
        let read = Access::new(&alice, Resource::Threads, Action::Read, None);
        let Decision::Only(filter) = OwnerOnly.authorize(&read, &mut Map::new()) else {
            panic!("threads are filtered")
        };
        assert!(!filter.matches(&system));
    }

    #[test]
    fn contains_wants_every_item_of_a_list() {
        let filter = Filter::new().contains("tags", json!(["a", "b"]));
        let held = |v: Value| v.as_object().cloned().unwrap();
        assert!(filter.matches(&held(json!({"tags": ["b", "c", "a"]}))));
        assert!(!filter.matches(&held(json!({"tags": ["a"]}))));
        assert!(!filter.matches(&held(json!({"tags": "a"}))));
        assert!(!Filter::any_of([]).matches(&Map::new()));
        assert!(Filter::new().matches(&Map::new()));
    }

    #[test]
    fn a_denial_names_the_user_the_action_and_the_resource() {
        let caller = Caller::new(
            Identity::new("bob"),
            Arc::new(|_: &Access<'_>, _: &mut Map<String, Value>| Decision::Deny),
        );
        let refused = caller
            .decide(
                Resource::Threads,
                Action::Delete,
                Some("t-1"),
                &mut Map::new(),
            )
            .unwrap_err();
        assert_eq!(refused.status(), StatusCode::FORBIDDEN);
        assert_eq!(
            refused.to_string(),
            "user `bob` may not delete threads (`t-1`)"
        );
        assert_eq!(
            Caller::default().decide(Resource::Threads, Action::Delete, None, &mut Map::new()),
            Ok(None)
        );
    }
}
