//! The JSON-RPC 2.0 side of the MCP server: what a message from the client is (request,
//! notification, response, or invalid), and the shape of an error response.

use serde_json::{Map, Value, json};

/// One parsed message from the client.
#[derive(Debug, PartialEq)]
pub(super) enum Incoming {
    /// A request: it gets exactly one response.
    Request { id: Value, method: String, params: Value },
    /// A notification: no response.
    Notification { method: String, params: Value },
    /// A response to a request of ours; this server sends none, so it is ignored.
    Response,
    /// Not a valid message: answered with this error (`id` null when it could not be read).
    Invalid { id: Value, message: String },
}

/// Classifies one JSON value (not an array) as a JSON-RPC 2.0 message.
pub(super) fn classify(value: Value) -> Incoming {
    let Value::Object(mut object) = value else {
        return Incoming::Invalid {
            id: Value::Null,
            message: "Invalid Request: not a JSON object".to_owned(),
        };
    };
    let id = object.remove("id");
    // MCP ids are strings or integers, never null.
    let valid_id = match &id {
        Some(Value::String(_)) => true,
        Some(Value::Number(number)) => number.is_i64() || number.is_u64(),
        _ => false,
    };
    let reply_id = if valid_id { id.clone().unwrap_or(Value::Null) } else { Value::Null };
    if object.get("jsonrpc") != Some(&Value::String("2.0".to_owned())) {
        let message = "Invalid Request: \"jsonrpc\" must be \"2.0\"".to_owned();
        return Incoming::Invalid { id: reply_id, message };
    }
    let params = object.remove("params").unwrap_or_else(|| Value::Object(Map::new()));
    match (object.remove("method"), id) {
        (Some(Value::String(method)), None) => Incoming::Notification { method, params },
        (Some(Value::String(method)), Some(_)) if valid_id => {
            Incoming::Request { id: reply_id, method, params }
        }
        (Some(Value::String(_)), Some(_)) => Incoming::Invalid {
            id: Value::Null,
            message: "Invalid Request: \"id\" must be a string or an integer".to_owned(),
        },
        (Some(_), _) => Incoming::Invalid {
            id: reply_id,
            message: "Invalid Request: \"method\" must be a string".to_owned(),
        },
        (None, Some(_)) if object.contains_key("result") || object.contains_key("error") => {
            Incoming::Response
        }
        (None, _) => Incoming::Invalid { id: reply_id, message: "Invalid Request: no \"method\"".to_owned() },
    }
}

/// A JSON-RPC error response.
pub(super) fn error_response(id: Value, code: i32, message: String) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
}

/// A request's result, or its JSON-RPC error code and message.
pub(super) type Outcome = Result<Value, (i32, String)>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_are_classified() {
        let request = classify(json!({"jsonrpc": "2.0", "id": 7, "method": "ping"}));
        assert_eq!(request, Incoming::Request { id: json!(7), method: "ping".to_owned(), params: json!({}) });
        let note = classify(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        assert!(
            matches!(note, Incoming::Notification { method, .. } if method == "notifications/initialized")
        );
        assert_eq!(classify(json!({"jsonrpc": "2.0", "id": 1, "result": {}})), Incoming::Response);
        let bad = |value| match classify(value) {
            Incoming::Invalid { id, .. } => Some(id),
            _ => None,
        };
        assert_eq!(bad(json!(3)), Some(Value::Null));
        assert_eq!(bad(json!({"id": 4, "method": "ping"})), Some(json!(4)));
        assert_eq!(bad(json!({"jsonrpc": "2.0", "id": null, "method": "ping"})), Some(Value::Null));
        assert_eq!(bad(json!({"jsonrpc": "2.0", "id": 1.5, "method": "ping"})), Some(Value::Null));
        assert_eq!(bad(json!({"jsonrpc": "2.0", "id": "a", "method": 5})), Some(json!("a")));
        assert_eq!(bad(json!({"jsonrpc": "2.0", "id": "a"})), Some(json!("a")));
    }
}
