//! The API's errors: an HTTP status and one sentence, as the reference server's JSON.

use crate::assistant::AssistantError;
use agentstate_store::StoreError;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

/// A refused or failed request: its HTTP status and a sentence naming the thread, run or
/// assistant and what was wrong. Its body is the reference server's shape,
/// `{"detail": "..."}`.
///
/// ```
/// use agentstate_server::ApiError;
/// use axum::http::StatusCode;
///
/// let error = ApiError::new(StatusCode::NOT_FOUND, "thread `t-1` does not exist");
/// assert_eq!(error.status(), StatusCode::NOT_FOUND);
/// assert_eq!(error.to_string(), "thread `t-1` does not exist");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    status: StatusCode,
    message: String,
}

impl ApiError {
    /// An error answered with `status`, saying `message`.
    pub fn new(status: StatusCode, message: impl Into<String>) -> Self {
        ApiError {
            status,
            message: message.into(),
        }
    }

    /// 401: the request is not a user's (what an [`Authenticate`](crate::Authenticate) hook
    /// answers a request it refuses; LangGraph's `Auth.exceptions.HTTPException`'s default).
    ///
    /// ```
    /// use agentstate_server::ApiError;
    ///
    /// let refused = ApiError::unauthorized("the token of the request to `/threads` has expired");
    /// assert_eq!(refused.status().as_u16(), 401);
    /// ```
    pub fn unauthorized(message: impl Into<String>) -> Self {
        ApiError::new(StatusCode::UNAUTHORIZED, message)
    }

    /// 404: `message` names what is missing.
    pub(crate) fn not_found(message: impl Into<String>) -> Self {
        ApiError::new(StatusCode::NOT_FOUND, message)
    }

    /// 422: the request asks for something this server cannot do.
    pub(crate) fn unprocessable(message: impl Into<String>) -> Self {
        ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, message)
    }

    /// 409: the thread or run is not in a state that allows it.
    pub(crate) fn conflict(message: impl Into<String>) -> Self {
        ApiError::new(StatusCode::CONFLICT, message)
    }

    /// The HTTP status.
    pub fn status(&self) -> StatusCode {
        self.status
    }
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for ApiError {}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = ErrorResponse {
            detail: self.message,
        };
        (self.status, axum::Json(body)).into_response()
    }
}

/// An error's body: what was refused or failed, and why (the reference's `ErrorResponse`).
#[derive(serde::Serialize, utoipa::ToSchema)]
pub(crate) struct ErrorResponse {
    /// Human-readable error message.
    detail: String,
}

/// The status of an error's category: missing things 404, a thread another worker holds 409,
/// bad input 422, the rest 500.
fn status_of(category: &str) -> StatusCode {
    match category {
        "thread_not_found" => StatusCode::NOT_FOUND,
        "thread_leased" | "thread_exists" | "state_write_conflict" => StatusCode::CONFLICT,
        "store_backend_error" | "store_corrupt_data" | "lease_lost" => {
            StatusCode::INTERNAL_SERVER_ERROR
        }
        _ => StatusCode::UNPROCESSABLE_ENTITY,
    }
}

impl From<AssistantError> for ApiError {
    fn from(error: AssistantError) -> Self {
        ApiError::new(status_of(&error.category), error.message)
    }
}

impl From<StoreError> for ApiError {
    fn from(error: StoreError) -> Self {
        ApiError::new(status_of(error.category()), error.to_string())
    }
}
