//! The Landlock ruleset of `strict` and `restricted`: every filesystem right and TCP bind/connect
//! is handled (denied unless a rule grants it), signals and abstract Unix sockets are scoped to
//! the sandbox. Read paths get read and execute, write paths everything; bridged ports may be
//! connected to. Requires Landlock ABI 6 (Linux 6.12) as a hard requirement.

use landlock::{
    ABI, Access, AccessFs, AccessNet, CompatLevel, Compatible, NetPort, Ruleset, RulesetAttr,
    RulesetCreatedAttr, RulesetStatus, Scope, path_beneath_rules,
};

use crate::launch_spec::{LaunchSpec, NetMode};

const ABI_NEEDED: ABI = ABI::V6;

fn unavailable(e: impl std::fmt::Display) -> String {
    format!(
        "strict and restricted isolation need Landlock ABI 6 (Linux 6.12 or later, with Landlock enabled at boot); this host cannot enforce it: {e}"
    )
}

pub(crate) fn restrict(spec: &LaunchSpec) -> Result<(), String> {
    let mut ruleset = Ruleset::default()
        .set_compatibility(CompatLevel::HardRequirement)
        .handle_access(AccessFs::from_all(ABI_NEEDED))
        .map_err(unavailable)?
        .handle_access(AccessNet::from_all(ABI_NEEDED))
        .map_err(unavailable)?
        .scope(Scope::from_all(ABI_NEEDED))
        .map_err(unavailable)?
        .create()
        .map_err(unavailable)?
        .add_rules(path_beneath_rules(
            &spec.read_paths,
            AccessFs::from_read(ABI_NEEDED),
        ))
        .map_err(unavailable)?
        .add_rules(path_beneath_rules(
            &spec.write_paths,
            AccessFs::from_all(ABI_NEEDED),
        ))
        .map_err(unavailable)?;
    if let NetMode::Bridged { hosts, .. } = &spec.net {
        for (_, port) in hosts {
            ruleset = ruleset
                .add_rule(NetPort::new(*port, AccessNet::ConnectTcp))
                .map_err(unavailable)?;
        }
    }
    let status = ruleset.restrict_self().map_err(unavailable)?;
    if status.ruleset != RulesetStatus::FullyEnforced {
        return Err(unavailable(format!(
            "the ruleset is only {:?}",
            status.ruleset
        )));
    }
    Ok(())
}
