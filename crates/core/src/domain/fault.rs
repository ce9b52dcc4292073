//! Channel-level failures: the channel refused *us*, not the message
//! (docs/design.md, "Dispatch", "A channel that refuses us"). A rejected
//! credential, an engine instance that does not exist or is not linked, a
//! TLS handshake that fails: no message can go out until someone fixes
//! the channel, and none of them says anything about the message itself.
//! So the message stays `planned`, its attempt is closed `not_sent`, and
//! the dispatcher pauses the channel and probes it with a request that
//! sends nothing.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// Why a channel refuses every request, whatever the message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ChannelFault {
    /// 401/403 from the engine or the Cloud API, or Graph error 190 (any
    /// subcode): the API key or access token is wrong, expired or revoked.
    CredentialRejected,
    /// The engine has no instance by the configured id
    /// (`404 instancia_desconocida`).
    InstanceUnknown,
    /// The engine instance exists but no phone is linked to it now
    /// (`503 instancia_desconectada`).
    InstanceDisconnected,
    /// The TLS handshake failed (certificate not trusted, expired, for
    /// another name; or not TLS at all): the request never left.
    Tls,
}

impl ChannelFault {
    pub const ALL: [ChannelFault; 4] = [
        Self::CredentialRejected,
        Self::InstanceUnknown,
        Self::InstanceDisconnected,
        Self::Tls,
    ];

    /// The stored word (`attempts.error_code`, `dispatchers.channel_error`,
    /// the `code` label on `/metrics`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::CredentialRejected => "credential_rejected",
            Self::InstanceUnknown => "instance_unknown",
            Self::InstanceDisconnected => "instance_disconnected",
            Self::Tls => "tls",
        }
    }

    pub fn parse(s: &str) -> Option<ChannelFault> {
        Self::ALL.into_iter().find(|f| f.as_str() == s)
    }

    /// The fault a stored `failed` attempt stands for, if it was one: an
    /// attempt closed before this distinction existed (unavez then marked
    /// the message `failed` on a 401) or by another channel's words. A
    /// refusal of the caller (401, 403, Graph 190, the engine's instance
    /// words) happens before the channel looks at the message, so nothing
    /// of it reached the channel.
    pub fn of_stored_failure(http_status: Option<u16>, error_code: Option<&str>) -> Option<ChannelFault> {
        if let Some(f) = error_code.and_then(ChannelFault::parse) {
            return Some(f);
        }
        match (http_status, error_code) {
            (_, Some("instancia_desconocida")) => Some(Self::InstanceUnknown),
            (_, Some("instancia_desconectada")) => Some(Self::InstanceDisconnected),
            (Some(401 | 403), _) | (_, Some("no_autorizado" | "190")) => Some(Self::CredentialRejected),
            _ => None,
        }
    }
}

impl fmt::Display for ChannelFault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown channel fault {0:?} (expected credential_rejected, instance_unknown, instance_disconnected or tls)")]
pub struct UnknownFault(pub String);

impl FromStr for ChannelFault {
    type Err = UnknownFault;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s).ok_or_else(|| UnknownFault(s.to_string()))
    }
}

/// A channel paused by its dispatcher: the fault, and the environment
/// variable its secret came from (what the operator must check; never the
/// secret). A key fixed in unavez's environment needs a restart: a running
/// process never sees its environment change.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ChannelPause {
    pub fault: ChannelFault,
    pub secret_env: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn faults_round_trip() {
        for f in ChannelFault::ALL {
            assert_eq!(f.as_str().parse::<ChannelFault>(), Ok(f));
            assert_eq!(serde_json::to_string(&f).unwrap(), format!("\"{f}\""));
        }
        assert!("tired".parse::<ChannelFault>().is_err());
    }

    #[test]
    fn stored_failures_of_the_caller_are_channel_faults_and_others_are_not() {
        use ChannelFault as F;
        let of = ChannelFault::of_stored_failure;
        assert_eq!(of(Some(401), Some("no_autorizado")), Some(F::CredentialRejected));
        assert_eq!(of(Some(403), Some("prohibido")), Some(F::CredentialRejected));
        assert_eq!(of(Some(401), Some("190")), Some(F::CredentialRejected));
        assert_eq!(of(Some(400), Some("190")), Some(F::CredentialRejected));
        assert_eq!(of(Some(404), Some("instancia_desconocida")), Some(F::InstanceUnknown));
        assert_eq!(
            of(Some(503), Some("instancia_desconectada")),
            Some(F::InstanceDisconnected)
        );
        assert_eq!(of(None, Some("tls")), Some(F::Tls));
        // About the message, not the caller: it stays failed.
        assert_eq!(of(Some(422), Some("destino_invalido")), None);
        assert_eq!(of(Some(400), Some("131026")), None);
        assert_eq!(of(Some(202), Some("comando_vencido")), None);
        assert_eq!(of(None, None), None);
    }
}
