//! Requests that are not valid extender requests, and how they are answered.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Deserialize;
use serde_json::json;

use crate::wire::{ExtenderArgs, ExtenderBindingArgs, ExtenderPreemptionArgs};

/// A request that is not a valid extender request.
#[derive(Clone, Debug, thiserror::Error)]
pub enum ApiError {
    #[error("request body is larger than the limit of {limit} bytes (--max-body-bytes)")]
    TooLarge { limit: usize },
    #[error("could not read the request body: {0}")]
    Body(String),
    #[error("invalid {what} JSON{at}: {message}")]
    BadJson {
        what: &'static str,
        at: String,
        message: String,
    },
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = match self {
            ApiError::TooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
            _ => StatusCode::BAD_REQUEST,
        };
        (status, Json(json!({ "Error": self.to_string() }))).into_response()
    }
}

/// The Go type name a body should decode as, for error messages.
pub trait WireName {
    const NAME: &'static str;
}
impl WireName for ExtenderArgs<'_> {
    const NAME: &'static str = "ExtenderArgs";
}
impl WireName for ExtenderBindingArgs {
    const NAME: &'static str = "ExtenderBindingArgs";
}
impl WireName for ExtenderPreemptionArgs {
    const NAME: &'static str = "ExtenderPreemptionArgs";
}

/// Decodes a request, naming the offending field on error.
pub fn decode<'a, T: Deserialize<'a> + WireName>(bytes: &'a [u8]) -> Result<T, ApiError> {
    let de = &mut serde_json::Deserializer::from_slice(bytes);
    serde_path_to_error::deserialize(de).map_err(|e| {
        let path = e.path().to_string();
        ApiError::BadJson {
            what: T::NAME,
            at: if path == "." || path == "?" {
                String::new()
            } else {
                format!(" at {path}")
            },
            message: e.into_inner().to_string(),
        }
    })
}
