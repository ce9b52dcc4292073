//! Unit tests of `motor.rs`: answer classification, `estado` mapping and
//! construction errors.

use super::*;
use reqwest::header::HeaderMap;

fn classify(status: u16, body: Value) -> SendOutcome {
    classify_send(
        StatusCode::from_u16(status).unwrap(),
        &HeaderMap::new(),
        body.to_string().as_bytes(),
    )
}

#[test]
fn every_engine_answer_has_one_class() {
    let cmd = json!({"command_id": "c1", "estado": "en_cola", "idempotency_key": "k"});
    assert!(matches!(
        classify(202, cmd.clone()),
        SendOutcome::Accepted {
            state: ChannelState::Queued,
            http_status: Some(202),
            ..
        }
    ));
    assert!(matches!(
        classify(429, cmd.clone()),
        SendOutcome::Accepted {
            http_status: Some(429),
            ..
        }
    ));
    assert!(matches!(
        classify(429, json!({"error": "ritmo_excedido"})),
        SendOutcome::Retry { .. }
    ));
    let SendOutcome::Conflict { detail, .. } =
        classify(409, json!({"error": "clave_en_uso", "detail": "otro contenido"}))
    else {
        panic!()
    };
    assert!(detail.contains("409") && detail.contains("otro contenido"), "{detail}");
    assert!(
        matches!(classify(422, json!({"error": "clave_invalida"})), SendOutcome::Failed { code, .. } if code == "clave_invalida")
    );
    assert!(matches!(
        classify(401, json!({})),
        SendOutcome::ChannelDown {
            fault: ChannelFault::CredentialRejected,
            http_status: Some(401),
            ..
        }
    ));
    // A 404 that is not about the instance keeps its meaning.
    assert!(matches!(
        classify(404, json!({"error": "x"})),
        SendOutcome::Failed { .. }
    ));
    assert!(matches!(
        classify(503, json!({})),
        SendOutcome::Retry {
            http_status: Some(503),
            ..
        }
    ));
    assert!(matches!(classify(500, json!("oops")), SendOutcome::Retry { .. }));
    assert!(matches!(classify(202, json!({})), SendOutcome::Uncertain { .. }));
    let failed = json!({"command_id": "c1", "estado": "fallido", "detail": "comando_vencido"});
    assert!(matches!(classify(202, failed), SendOutcome::Failed { code, .. } if code == "comando_vencido"));
    let amb = json!({"command_id": "c1", "estado": "ambiguo"});
    assert!(matches!(
        classify(202, amb),
        SendOutcome::Accepted {
            state: ChannelState::Ambiguous,
            ..
        }
    ));
}

#[test]
fn estados_map_onto_channel_states() {
    for (e, s) in [
        ("en_cola", ChannelState::Queued),
        ("enviado", ChannelState::Sent),
        ("entregado", ChannelState::Delivered),
        ("leido", ChannelState::Read),
        ("fallido", ChannelState::Failed),
        ("cancelado", ChannelState::Cancelled),
        ("ambiguo", ChannelState::Ambiguous),
    ] {
        assert_eq!(map_estado(e), Some(s));
    }
    assert_eq!(map_estado("raro"), None);
}

#[test]
fn construction_errors_name_the_problem() {
    let mut cfg = MotorConfig {
        api_key_env: "UNAVEZ_TEST_SURELY_UNSET_KEY".into(),
        ..MotorConfig::default()
    };
    let e = MotorChannel::with_api_key(&cfg, " ").unwrap_err().to_string();
    assert!(e.contains("UNAVEZ_TEST_SURELY_UNSET_KEY"), "{e}");
    cfg.base_url = "ftp://x".into();
    let e = MotorChannel::with_api_key(&cfg, "k").unwrap_err().to_string();
    assert!(e.contains("channel.motor.base_url"), "{e}");
    cfg.base_url = "http://x".into();
    cfg.instance_id = "a/b".into();
    let e = MotorChannel::with_api_key(&cfg, "k").unwrap_err().to_string();
    assert!(e.contains("channel.motor.instance_id"), "{e}");
    cfg.instance_id = "a".into();
    cfg.connect_timeout_ms = 0;
    let e = MotorChannel::with_api_key(&cfg, "k").unwrap_err().to_string();
    assert!(e.contains("channel.motor.timeout_ms"), "{e}");
}

#[test]
fn the_engine_refusing_us_is_told_apart_from_refusing_the_message() {
    use ChannelFault as F;
    for (status, body, want) in [
        (
            401,
            json!({"error": "no_autorizado", "detail": "api key desconocida"}),
            F::CredentialRejected,
        ),
        (403, json!({"error": "prohibido"}), F::CredentialRejected),
        (404, json!({"error": "instancia_desconocida"}), F::InstanceUnknown),
        (503, json!({"error": "instancia_desconectada"}), F::InstanceDisconnected),
    ] {
        match classify(status, body.clone()) {
            SendOutcome::ChannelDown {
                fault,
                detail,
                http_status,
            } => {
                assert_eq!((fault, http_status), (want, Some(status)), "{body}");
                assert!(detail.contains(&status.to_string()), "{detail}");
            }
            other => panic!("{status} {body}: {other:?}"),
        }
    }
    // The engine itself paused (`motor_no_disponible`) is a retry, as before.
    assert!(matches!(
        classify(503, json!({"error": "motor_no_disponible"})),
        SendOutcome::Retry { .. }
    ));
    // The probe: the key, the instance, whether a phone is linked.
    let probe =
        |status: u16, body: Value| classify_probe(StatusCode::from_u16(status).unwrap(), body.to_string().as_bytes());
    assert_eq!(
        probe(200, json!({"instance_id": "i", "estado": "conectada"})),
        ProbeOutcome::Ok
    );
    assert!(matches!(
        probe(200, json!({"estado": "desconectada"})),
        ProbeOutcome::Down {
            fault: F::InstanceDisconnected,
            ..
        }
    ));
    assert!(matches!(
        probe(401, json!({"error": "no_autorizado"})),
        ProbeOutcome::Down {
            fault: F::CredentialRejected,
            ..
        }
    ));
    assert!(matches!(
        probe(404, json!({"error": "instancia_desconocida"})),
        ProbeOutcome::Down {
            fault: F::InstanceUnknown,
            ..
        }
    ));
    assert!(matches!(probe(500, json!({})), ProbeOutcome::Unavailable { .. }));
}
