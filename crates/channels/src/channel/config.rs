//! The `[channel]` section of the configuration: which channel, and how to
//! reach the engine or the Cloud API. Lives with the channels so they do not
//! depend on the configuration loader (`config` re-exports these types).

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum ChannelKind {
    /// The WhatsApp WhatsApp engine (or `unavez sim`).
    #[default]
    Motor,
    /// The WhatsApp Cloud API.
    Cloud,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ChannelConfig {
    pub kind: ChannelKind,
    pub motor: MotorConfig,
    pub cloud: CloudConfig,
}

impl Default for ChannelConfig {
    fn default() -> Self {
        ChannelConfig {
            kind: ChannelKind::Motor,
            motor: MotorConfig::default(),
            cloud: CloudConfig::default(),
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct MotorConfig {
    /// Base URL of the engine, e.g. `http://127.0.0.1:8088`.
    pub base_url: String,
    pub instance_id: String,
    /// Environment variable holding the bearer API key.
    pub api_key_env: String,
    /// Optional `generacion_esperada` sent with each message.
    pub expected_generation: Option<i64>,
    /// Per-request timeout; a timeout after sending makes the send uncertain.
    pub timeout_ms: u64,
    pub connect_timeout_ms: u64,
}

impl Default for MotorConfig {
    fn default() -> Self {
        MotorConfig {
            base_url: "http://127.0.0.1:8088".into(),
            instance_id: "clinica-principal".into(),
            api_key_env: "UNAVEZ_MOTOR_API_KEY".into(),
            expected_generation: None,
            timeout_ms: 5_000,
            connect_timeout_ms: 1_000,
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CloudConfig {
    /// `https://graph.facebook.com` in production; a local fake in tests.
    pub base_url: String,
    pub api_version: String,
    pub phone_number_id: String,
    /// The WhatsApp Business Account id (WhatsApp Manager → account
    /// settings): whose message templates `unavez templates` and
    /// `unavez doctor` compare with the templates file.
    pub waba_id: String,
    /// Environment variable holding the access token.
    pub token_env: String,
    pub timeout_ms: u64,
}

impl Default for CloudConfig {
    fn default() -> Self {
        CloudConfig {
            base_url: "https://graph.facebook.com".into(),
            api_version: "v21.0".into(),
            phone_number_id: String::new(),
            waba_id: String::new(),
            token_env: "UNAVEZ_CLOUD_TOKEN".into(),
            timeout_ms: 10_000,
        }
    }
}
