//! Pure parsing of one frame body into JSON-RPC calls, and building of the error responses the
//! driver answers on its own (parse errors, invalid requests, gating). No IO here.

use std::borrow::Cow;

use jsonrpsee::core::server::MethodResponse;
use jsonrpsee::types::{ErrorObject, ErrorObjectOwned, Id, InvalidRequest, Notification, Request};
use serde_json::value::RawValue;

use filectx_protocol::error::{INVALID_REQUEST, PARSE_ERROR};

use crate::json::Json;

/// What one frame body holds.
#[derive(Debug)]
pub enum Incoming<'a> {
    /// One JSON object.
    Single(&'a RawValue),
    /// A non-empty JSON array.
    Batch(Vec<&'a RawValue>),
}

/// One entry of a frame, classified.
#[derive(Debug)]
pub enum Call<'a> {
    /// A request: it gets exactly one response.
    Request(Request<'a>),
    /// A notification: it gets no response.
    Notification(Notification<'a, Option<&'a RawValue>>),
    /// Valid JSON that is not a JSON-RPC 2.0 call; answered -32600 with the id if one was found.
    Invalid(Id<'a>),
}

/// A serialized error response.
pub fn error_response(id: Id<'_>, error: ErrorObjectOwned) -> Json {
    Json::from(MethodResponse::error(id, error).into_parts().0)
}

/// A response serialized beforehand (see `rpc::PreparedResponse`), or, past `max_bytes`, the error
/// jsonrpsee gives an oversized response.
pub fn bounded(id: Id<'_>, json: Json, max_bytes: usize) -> Json {
    if json.len() <= max_bytes {
        return json;
    }
    let data = format!("Exceeded max limit of {max_bytes}");
    error_response(
        id,
        ErrorObject::owned(
            jsonrpsee::types::error::OVERSIZED_RESPONSE_CODE,
            jsonrpsee::types::error::OVERSIZED_RESPONSE_MSG,
            Some(data),
        ),
    )
}

fn plain_error(id: Id<'_>, code: i32, message: impl Into<String>) -> Json {
    error_response(id, ErrorObject::owned(code, message.into(), None::<()>))
}

/// Splits a frame body into calls; `Err` carries the response to send instead.
pub fn classify(body: &[u8]) -> Result<Incoming<'_>, Json> {
    let raw: &RawValue = match serde_json::from_slice(body) {
        Ok(raw) => raw,
        Err(err) => {
            let what =
                if std::str::from_utf8(body).is_err() { "body is not valid UTF-8" } else { "invalid JSON" };
            return Err(plain_error(Id::Null, PARSE_ERROR, format!("Parse error: {what} ({err})")));
        }
    };
    match raw.get().as_bytes().first() {
        Some(b'{') => Ok(Incoming::Single(raw)),
        Some(b'[') => {
            let entries: Vec<&RawValue> = serde_json::from_str(raw.get())
                .map_err(|err| plain_error(Id::Null, PARSE_ERROR, format!("Parse error: {err}")))?;
            if entries.is_empty() {
                return Err(plain_error(Id::Null, INVALID_REQUEST, "Invalid request: empty batch"));
            }
            Ok(Incoming::Batch(entries))
        }
        _ => Err(plain_error(
            Id::Null,
            INVALID_REQUEST,
            "Invalid request: a JSON-RPC message must be an object or a non-empty array",
        )),
    }
}

/// Does this JSON object have an `id` member (even `null`)? That, and nothing else, makes it
/// a request rather than a notification. Only the member names are looked at (unescaped, the
/// last of duplicates counting like any other); nothing is allocated for them.
fn has_id(raw: &RawValue) -> bool {
    use serde::de::{Deserializer as _, IgnoredAny, MapAccess, Visitor};

    /// A member name, compared with `id` as it is read.
    struct IsId(bool);
    impl<'de> serde::Deserialize<'de> for IsId {
        fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
            struct Name;
            impl Visitor<'_> for Name {
                type Value = IsId;
                fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                    f.write_str("a member name")
                }
                fn visit_str<E: serde::de::Error>(self, name: &str) -> Result<IsId, E> {
                    Ok(IsId(name == "id"))
                }
            }
            deserializer.deserialize_str(Name)
        }
    }

    struct Members;
    impl<'de> Visitor<'de> for Members {
        type Value = bool;
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("a JSON object")
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<bool, A::Error> {
            let mut found = false;
            while let Some(IsId(is_id)) = map.next_key::<IsId>()? {
                found |= is_id;
                map.next_value::<IgnoredAny>()?;
            }
            Ok(found)
        }
    }
    serde_json::Deserializer::from_str(raw.get()).deserialize_map(Members).unwrap_or(false)
}

/// A request's members as they are, the id not yet interpreted.
#[derive(serde::Deserialize)]
struct RequestShape<'a> {
    #[allow(dead_code, reason = "checked by its type (\"2.0\"), not used")]
    jsonrpc: jsonrpsee::types::TwoPointZero,
    #[serde(borrow)]
    id: &'a RawValue,
    #[serde(borrow)]
    method: Cow<'a, str>,
    #[serde(borrow)]
    params: Option<&'a RawValue>,
}

/// The common ids read straight from their text: `null`, a plain unsigned integer, a string
/// without escapes. `None` for anything else (jsonrpsee's own parse decides those).
fn plain_id(raw: &RawValue) -> Option<Id<'_>> {
    let text = raw.get();
    match text.as_bytes().first()? {
        b'n' => (text == "null").then_some(Id::Null),
        b'0'..=b'9' if text.bytes().all(|b| b.is_ascii_digit()) => text.parse().ok().map(Id::Number),
        b'"' if text.len() >= 2 && !text.contains('\\') => {
            text.get(1..text.len() - 1).map(|inner| Id::Str(Cow::Borrowed(inner)))
        }
        _ => None,
    }
}

/// A request read in one pass, when its id is one of the common kinds (see [`plain_id`]);
/// `None` leaves it to jsonrpsee's `Request`, whose parse tries each kind of id in turn and
/// builds an error for every kind that does not fit. Whatever this accepts, `Request` accepts
/// with the same members.
fn request_fast(raw: &RawValue) -> Option<Request<'_>> {
    let shape: RequestShape<'_> = serde_json::from_str(raw.get()).ok()?;
    let id = plain_id(shape.id)?;
    Some(Request {
        jsonrpc: jsonrpsee::types::TwoPointZero,
        id,
        method: shape.method,
        params: shape.params.map(Cow::Borrowed),
        extensions: jsonrpsee::Extensions::new(),
    })
}

/// Classifies one JSON value (a single message or a batch entry).
pub fn parse_call(raw: &RawValue) -> Call<'_> {
    if !raw.get().starts_with('{') {
        return Call::Invalid(Id::Null);
    }
    if has_id(raw) {
        if let Some(request) = request_fast(raw) {
            return Call::Request(request);
        }
        match serde_json::from_str::<Request<'_>>(raw.get()) {
            Ok(request) => Call::Request(request),
            Err(_) => match serde_json::from_str::<InvalidRequest<'_>>(raw.get()) {
                Ok(InvalidRequest { id }) => Call::Invalid(id),
                Err(_) => Call::Invalid(Id::Null),
            },
        }
    } else {
        match serde_json::from_str::<Notification<'_, Option<&RawValue>>>(raw.get()) {
            Ok(notification) => Call::Notification(notification),
            Err(_) => Call::Invalid(Id::Null),
        }
    }
}

/// A response from the client (an object with `id` and `result` or `error`, and no `method`):
/// the id when it is a string (the daemon's own requests use string ids), and the answer.
/// `None` when the body is not a single response.
pub fn response(body: &[u8]) -> Option<(Option<String>, crate::session::outbound::Answer)> {
    use crate::session::outbound::Answer;
    #[derive(serde::Deserialize)]
    struct ErrorShape {
        code: i64,
        #[serde(default)]
        message: String,
    }
    if body.iter().find(|b| !b.is_ascii_whitespace()) != Some(&b'{') {
        return None;
    }
    let members: std::collections::BTreeMap<Cow<'_, str>, &RawValue> = serde_json::from_slice(body).ok()?;
    if members.contains_key("method") {
        return None;
    }
    let id = members.get("id")?;
    let answer = match (members.get("result"), members.get("error")) {
        (Some(result), None) => Answer::Result((*result).to_owned()),
        (None, Some(error)) => match serde_json::from_str::<ErrorShape>(error.get()) {
            Ok(error) => Answer::Error { code: error.code, message: error.message },
            Err(_) => Answer::Error { code: 0, message: "malformed error".to_owned() },
        },
        _ => return None,
    };
    Some((serde_json::from_str::<String>(id.get()).ok(), answer))
}

/// -32600 for a value that is not a JSON-RPC 2.0 call.
pub fn invalid_request(id: Id<'_>) -> Json {
    plain_error(
        id,
        INVALID_REQUEST,
        "Invalid request: expected {\"jsonrpc\": \"2.0\", \"method\": string, \"id\"?: number|string, \"params\"?: object|array}",
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kind(json: &str) -> String {
        let raw: Box<RawValue> = serde_json::from_str(json).unwrap();
        match parse_call(&raw) {
            Call::Request(r) => format!("request {} {}", r.id, r.method),
            Call::Notification(n) => format!("notification {}", n.method),
            Call::Invalid(id) => format!("invalid {id}"),
        }
    }

    #[test]
    fn calls_are_classified_by_the_presence_of_id() {
        assert_eq!(kind(r#"{"jsonrpc":"2.0","id":1,"method":"a"}"#), "request 1 a");
        assert_eq!(kind(r#"{"jsonrpc":"2.0","id":"x","method":"a","params":{}}"#), "request x a");
        assert_eq!(kind(r#"{"jsonrpc":"2.0","id":null,"method":"a"}"#), "request null a");
        assert_eq!(kind(r#"{"jsonrpc":"2.0","method":"exit"}"#), "notification exit");
        assert_eq!(kind(r#"{"jsonrpc":"1.0","id":7,"method":"a"}"#), "invalid 7");
        assert_eq!(kind(r#"{"jsonrpc":"2.0","id":{},"method":"a"}"#), "invalid null");
        assert_eq!(kind(r#"{"jsonrpc":"2.0","id":3,"method":5}"#), "invalid 3");
        assert_eq!(kind(r#"{"jsonrpc":"2.0","method":5}"#), "invalid null");
        assert_eq!(kind(r#"{"foo":"bar"}"#), "invalid null");
        assert_eq!(kind("42"), "invalid null");
    }

    #[test]
    fn requests_read_in_one_pass_are_read_as_jsonrpsee_reads_them() {
        let cases = [
            r#"{"jsonrpc":"2.0","id":1,"method":"file/read","params":{"path":"a"}}"#,
            r#"{"id":18446744073709551615,"method":"m","jsonrpc":"2.0"}"#,
            r#"{"jsonrpc":"2.0","id":18446744073709551616,"method":"m"}"#,
            r#"{"jsonrpc":"2.0","id":-1,"method":"m"}"#,
            r#"{"jsonrpc":"2.0","id":1.5,"method":"m"}"#,
            r#"{"jsonrpc":"2.0","id":1e3,"method":"m"}"#,
            r#"{"jsonrpc":"2.0","id":"abc","method":"m","params":[1,2]}"#,
            r#"{"jsonrpc":"2.0","id":"a\"b\u00e9","method":"m"}"#,
            r#"{"jsonrpc":"2.0","id":"","method":"m"}"#,
            r#"{"jsonrpc":"2.0","id":null,"method":"m","params":null}"#,
            r#"{"jsonrpc":"2.0","id":true,"method":"m"}"#,
            r#"{"jsonrpc":"2.0","id":[],"method":"m"}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"m\u0041","extra":{"x":[1]}}"#,
            r#"{"jsonrpc":"2.0","id":1,"id":2,"method":"m"}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"m","method":"n"}"#,
            r#"{"jsonrpc":"1.0","id":1,"method":"m"}"#,
            r#"{"jsonrpc":"2.0","id":1}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":7}"#,
            r#"{ "jsonrpc" : "2.0" , "id" : 7 , "method" : "m" , "params" : { } }"#,
        ];
        for case in cases {
            let raw: Box<RawValue> = serde_json::from_str(case).unwrap();
            let theirs = serde_json::from_str::<Request<'_>>(raw.get()).ok();
            if let Some(ours) = request_fast(&raw) {
                let theirs = theirs.unwrap_or_else(|| panic!("jsonrpsee refuses what was read: {case}"));
                assert_eq!(ours.id, theirs.id, "{case}");
                assert_eq!(ours.method, theirs.method, "{case}");
                assert_eq!(
                    ours.params.map(|p| p.get().to_owned()),
                    theirs.params.map(|p| p.get().to_owned())
                );
            }
            let (ours, theirs) = (kind(case), kind_by_jsonrpsee(case));
            assert_eq!(ours, theirs, "{case}");
        }
        // The common kinds do take the one pass.
        for case in [&cases[0], &cases[6], &cases[9], &cases[18]] {
            assert!(request_fast(&serde_json::from_str::<Box<RawValue>>(case).unwrap()).is_some(), "{case}");
        }
    }

    /// [`kind`] as it was before the one-pass read: every request through jsonrpsee's
    /// `Request`, the id's presence through a map of every member.
    fn kind_by_jsonrpsee(json: &str) -> String {
        let raw: Box<RawValue> = serde_json::from_str(json).unwrap();
        let has_id = serde_json::from_str::<std::collections::BTreeMap<Cow<'_, str>, &RawValue>>(raw.get())
            .is_ok_and(|members| members.contains_key("id"));
        if !raw.get().starts_with('{') {
            return "invalid null".to_owned();
        }
        if has_id {
            match serde_json::from_str::<Request<'_>>(raw.get()) {
                Ok(r) => format!("request {} {}", r.id, r.method),
                Err(_) => match serde_json::from_str::<InvalidRequest<'_>>(raw.get()) {
                    Ok(InvalidRequest { id }) => format!("invalid {id}"),
                    Err(_) => "invalid null".to_owned(),
                },
            }
        } else {
            match serde_json::from_str::<Notification<'_, Option<&RawValue>>>(raw.get()) {
                Ok(n) => format!("notification {}", n.method),
                Err(_) => "invalid null".to_owned(),
            }
        }
    }

    #[test]
    fn responses_are_told_from_calls() {
        use crate::session::outbound::Answer;
        let got = |body: &str| match response(body.as_bytes()) {
            None => "not a response".to_owned(),
            Some((id, Answer::Result(raw))) => format!("{id:?} result {}", raw.get()),
            Some((id, Answer::Error { code, message })) => format!("{id:?} error {code} {message}"),
        };
        assert_eq!(
            got(r#"{"jsonrpc":"2.0","id":"intent-1","result":{"allow":true}}"#),
            r#"Some("intent-1") result {"allow":true}"#
        );
        assert_eq!(got(r#" {"jsonrpc":"2.0","id":"i","result":null}"#), r#"Some("i") result null"#);
        assert_eq!(got(r#"{"jsonrpc":"2.0","id":7,"error":{"code":-1,"message":"no"}}"#), "None error -1 no");
        assert_eq!(got(r#"{"jsonrpc":"2.0","id":"x","method":"m","result":1}"#), "not a response");
        assert_eq!(got(r#"{"jsonrpc":"2.0","id":"x"}"#), "not a response");
        assert_eq!(got(r#"{"jsonrpc":"2.0","method":"exit"}"#), "not a response");
        assert_eq!(got(r#"[{"jsonrpc":"2.0","id":"x","result":1}]"#), "not a response");
        assert_eq!(got("{not json"), "not a response");
    }

    #[test]
    fn frames_that_are_not_calls_get_the_standard_errors() {
        let err = |body: &[u8]| match classify(body) {
            Err(json) => json.as_str().into_owned(),
            Ok(_) => "ok".to_owned(),
        };
        assert!(err(b"{not json").contains("-32700"));
        assert!(err(b"\xff\xfe").contains("not valid UTF-8"));
        assert!(err(b"42").contains("-32600"));
        assert!(err(b"\"str\"").contains("-32600"));
        assert!(err(b"[]").contains("empty batch"));
        assert_eq!(err(b" {\"a\":1} "), "ok");
        assert_eq!(err(b"[1,2]"), "ok");
    }
}
