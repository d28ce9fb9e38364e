//! `POST <prefix>/bind`: kube-scheduler's `ExtenderBindingArgs` in, `ExtenderBindingResult`
//! out. What a bind call does is [`crate::binding`]'s.

use axum::response::{IntoResponse, Response};
use axum::Json;

use super::call::{Bind, Call};
use crate::binding::{self, BindCall};
use crate::model::BindRequest;
use crate::wire::{ExtenderBindingArgs, ExtenderBindingResult};

pub(super) async fn bind(call: Call<Bind>) -> Response {
    let args: ExtenderBindingArgs = match call.decode() {
        Ok(a) => a,
        Err(r) => return *r,
    };
    let answer = |outcome: &'static str, error: String| {
        call.record(outcome);
        Json(ExtenderBindingResult { error }).into_response()
    };
    if let Err(refusal) = call.admit() {
        return answer("refused", refusal.message());
    }
    let request = BindCall {
        request: BindRequest {
            namespace: &args.pod_namespace,
            name: &args.pod_name,
            uid: &args.pod_uid,
            node: &args.node,
        },
        answer_by: call.answer_by(),
        bind_wait: call.bind_wait,
    };
    let admit = || call.admit().map_err(|r| r.message());
    match binding::bind(&call.shared, request, admit).await {
        Ok(()) => answer("ok", String::new()),
        Err(e) => answer("refused", e),
    }
}
