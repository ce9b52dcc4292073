//! The domain: pure code, no I/O. States, transitions, keys, fingerprints,
//! commitment versions and the input contract. Everything here is tested
//! exhaustively without a database or a network.

pub mod alert;
pub mod attempt;
pub mod attention;
pub mod backup;
pub mod call;
pub mod channel_event;
pub mod claim;
pub mod commitment;
pub mod counter;
pub mod event;
pub mod fault;
pub mod feed;
pub mod fingerprint;
pub mod finish;
pub mod guard;
pub mod heartbeat;
pub mod history;
pub mod inbound;
pub mod intention;
pub mod json;
pub mod key;
pub mod lifecycle;
pub mod mask;
pub mod operator;
pub mod phone;
pub mod presend;
pub mod reconcile;
pub mod recovery;
pub mod refusal;
pub mod state;
pub mod status;
pub mod text;
pub mod validity;
pub mod verdict;
pub mod webhook;
