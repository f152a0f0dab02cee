//! The git-ignored env file through which the local chain tells the edge API, the relayer and
//! the tests where everything is. It is written last and atomically, so a reader that sees it
//! sees a chain that is deployed and seeded.

use std::{fmt::Write as _, path::Path};

use crate::{
    Deployment,
    dev_accounts::{self, Role},
};

/// Default location, relative to the workspace root.
pub const DEFAULT_PATH: &str = ".devchain/env";

/// Renders the env file of a deployment on `rpc_url`.
pub fn render(rpc_url: &str, chain_id: u64, deployment: &Deployment, demo_data: Option<&Path>) -> String {
    let mut out = String::from(
        "# Written by kya-devchain for the local chain. The keys are anvil's public test keys.\n",
    );
    let mut line = |key: &str, value: &dyn std::fmt::Display| {
        writeln!(out, "{key}={value}").expect("writing to a String cannot fail");
    };
    line("RPC_URL", &rpc_url);
    line("CHAIN_ID", &chain_id);
    line("REGISTRY_ADDRESS", &deployment.registry);
    line("FORWARDER_ADDRESS", &deployment.forwarder);
    line("OWNER_ADDRESS", &deployment.owner);
    line("OWNER_KEY", &dev_accounts::key_hex(Role::Owner));
    line("REGULATOR_ADDRESS", &deployment.regulator);
    line("REGULATOR_KEY", &dev_accounts::key_hex(Role::Regulator));
    line("RELAYER_ADDRESS", &dev_accounts::address(Role::Relayer));
    line("RELAYER_KEY", &dev_accounts::key_hex(Role::Relayer));
    if let Some(path) = demo_data {
        line("DEMO_DATA", &path.display());
    }
    out
}

/// Writes `contents` to `path` through a temporary file and a rename.
pub fn write_atomically(path: &Path, contents: &str) -> std::io::Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let temporary = path.with_extension("partial");
    std::fs::write(&temporary, contents)?;
    std::fs::rename(temporary, path)
}
