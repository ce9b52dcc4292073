//! Unit tests of `cloud.rs`: answer classification and request bodies.

use super::*;
use reqwest::header::HeaderMap;

fn classify(status: u16, body: Value) -> SendOutcome {
    classify_send(
        StatusCode::from_u16(status).unwrap(),
        &HeaderMap::new(),
        body.to_string().as_bytes(),
    )
}

fn graph(code: i64) -> Value {
    json!({"error": {"message": "m", "code": code, "type": "OAuthException"}})
}

#[test]
fn graph_errors_are_classified() {
    assert!(matches!(
        classify(200, json!({"messages": [{"id": "wamid.1"}]})),
        SendOutcome::Accepted { message_id: Some(m), command_id: None, .. } if m == "wamid.1"
    ));
    assert!(matches!(classify(200, json!({})), SendOutcome::Uncertain { .. }));
    for code in [131026, 131049, 131047, 100] {
        assert!(
            matches!(classify(400, graph(code)), SendOutcome::Failed { code: c, .. } if c == code.to_string()),
            "{code}"
        );
    }
    for code in [130429, 131056] {
        assert!(
            matches!(classify(429, graph(code)), SendOutcome::Retry { .. }),
            "{code}"
        );
    }
    assert!(matches!(
        classify(502, json!("bad gateway")),
        SendOutcome::Uncertain { .. }
    ));
    assert!(matches!(classify(404, json!("nope")), SendOutcome::Failed { code, .. } if code == "http_404"));
}

fn req(window: bool) -> SendRequest {
    SendRequest {
        key: "k1".into(),
        recipient: "+51987654321".into(),
        body: "Hola Ana".into(),
        template: "cita_recordatorio".into(),
        language: "es_PE".into(),
        parameters: vec!["Ana".into(), "09:30".into()],
        expires_at: None,
        correlation_id: "c".into(),
        in_service_window: window,
    }
}

#[test]
fn text_inside_the_window_template_outside() {
    let t = CloudChannel::body(&req(true));
    assert_eq!(t["type"], "text");
    assert_eq!(t["text"]["body"], "Hola Ana");
    assert_eq!(t["biz_opaque_callback_data"], "k1");
    let p = CloudChannel::body(&req(false));
    assert_eq!(p["type"], "template");
    assert_eq!(p["template"]["name"], "cita_recordatorio");
    assert_eq!(p["template"]["language"]["code"], "es_PE");
    assert_eq!(p["template"]["components"][0]["parameters"][1]["text"], "09:30");
    assert_eq!(p["biz_opaque_callback_data"], "k1");
}

#[test]
fn construction_errors_name_the_field() {
    let mut cfg = CloudConfig {
        phone_number_id: " ".into(),
        ..CloudConfig::default()
    };
    let e = CloudChannel::with_token(&cfg, "").unwrap_err().to_string();
    assert!(e.contains("UNAVEZ_CLOUD_TOKEN") && e.contains("access token"), "{e}");
    let e = CloudChannel::with_token(&cfg, "t").unwrap_err().to_string();
    assert!(
        e.contains("channel.cloud.phone_number_id") && e.contains("WhatsApp Manager"),
        "{e}"
    );
    cfg.phone_number_id = "123".into();
    cfg.timeout_ms = 0;
    let e = CloudChannel::with_token(&cfg, "t").unwrap_err().to_string();
    assert!(e.contains("channel.cloud.timeout_ms"), "{e}");
    cfg.timeout_ms = 1_000;
    cfg.api_version = "/v21.0/".into();
    let ch = CloudChannel::with_token(&cfg, "t").unwrap();
    assert_eq!(ch.url, "https://graph.facebook.com/v21.0/123/messages");
}

#[test]
fn a_rejected_token_is_the_channel_refusing_us_not_a_failed_message() {
    let expired = json!({"error": {"message": "Error validating access token: Session has expired",
        "type": "OAuthException", "code": 190, "error_subcode": 463}});
    // Graph 190 and its subcodes, whatever the HTTP status; 401 and 403
    // whatever the body.
    for (status, body) in [
        (401, expired.clone()),
        (400, expired),
        (401, graph(190)),
        (401, json!("no body")),
        (403, graph(10)),
    ] {
        match classify(status, body.clone()) {
            SendOutcome::ChannelDown {
                fault,
                http_status,
                detail,
            } => {
                assert_eq!(fault, ChannelFault::CredentialRejected, "{status} {body}");
                assert_eq!(http_status, Some(status));
                assert!(!detail.is_empty());
            }
            other => panic!("{status} {body}: {other:?}"),
        }
    }
    let d = match classify(
        401,
        json!({"error": {"message": "m", "code": 190, "error_subcode": 463}}),
    ) {
        SendOutcome::ChannelDown { detail, .. } => detail,
        o => panic!("{o:?}"),
    };
    assert!(d.contains("190/463"), "{d}");
    // The probe reads the same refusal, and a 200 as the token working.
    let probe =
        |status: u16, body: Value| classify_probe(StatusCode::from_u16(status).unwrap(), body.to_string().as_bytes());
    assert!(matches!(
        probe(401, graph(190)),
        ProbeOutcome::Down {
            fault: ChannelFault::CredentialRejected,
            ..
        }
    ));
    assert_eq!(probe(200, json!({"id": "1234567890"})), ProbeOutcome::Ok);
    assert!(matches!(probe(500, json!("x")), ProbeOutcome::Unavailable { .. }));
}
