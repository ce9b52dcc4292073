//! Operators and their roles: who may do what in the console and the CLI.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    FrontDesk,
    Supervisor,
    Technician,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::FrontDesk => "front_desk",
            Role::Supervisor => "supervisor",
            Role::Technician => "technician",
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct Operator {
    pub name: String,
    pub role: Role,
    /// The OS account this operator signs in with. Once any operator has
    /// one, identity comes from the account running unavez, not from
    /// `--operator` (docs/design.md, "Operator identity").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub os_user: Option<String>,
}
