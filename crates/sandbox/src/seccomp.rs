//! The system-call filter of `strict` and `restricted`: a deny list (errno `EPERM`) of what a tool
//! has no business doing, compiled to seccomp-BPF. `clone3` answers `ENOSYS` so that the C
//! library falls back to `clone`, whose flags the filter can see (new namespaces, and for
//! `restricted` new processes, are refused there).

use std::collections::BTreeMap;

use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule, TargetArch,
};
use toolgate_core::Isolation;

/// System calls refused outright from `strict` up.
const DENIED: &[i64] = &[
    libc::SYS_ptrace,
    libc::SYS_process_vm_readv,
    libc::SYS_process_vm_writev,
    libc::SYS_mount,
    libc::SYS_umount2,
    libc::SYS_pivot_root,
    libc::SYS_chroot,
    libc::SYS_move_mount,
    libc::SYS_open_tree,
    libc::SYS_fsopen,
    libc::SYS_fsconfig,
    libc::SYS_fsmount,
    libc::SYS_fspick,
    libc::SYS_mount_setattr,
    libc::SYS_bpf,
    libc::SYS_keyctl,
    libc::SYS_add_key,
    libc::SYS_request_key,
    libc::SYS_userfaultfd,
    libc::SYS_perf_event_open,
    libc::SYS_io_uring_setup,
    libc::SYS_io_uring_enter,
    libc::SYS_io_uring_register,
    libc::SYS_unshare,
    libc::SYS_setns,
    libc::SYS_kexec_load,
    libc::SYS_kexec_file_load,
    libc::SYS_init_module,
    libc::SYS_finit_module,
    libc::SYS_delete_module,
    libc::SYS_reboot,
    libc::SYS_swapon,
    libc::SYS_swapoff,
    libc::SYS_open_by_handle_at,
    libc::SYS_name_to_handle_at,
    libc::SYS_acct,
    libc::SYS_quotactl,
    libc::SYS_syslog,
    libc::SYS_settimeofday,
    libc::SYS_clock_settime,
    libc::SYS_clock_adjtime,
    libc::SYS_adjtimex,
    libc::SYS_iopl,
    libc::SYS_ioperm,
    libc::SYS_vhangup,
    libc::SYS_pidfd_getfd,
];

/// `clone` flags that create namespaces.
const NAMESPACE_FLAGS: &[i32] = &[
    libc::CLONE_NEWNS,
    libc::CLONE_NEWUSER,
    libc::CLONE_NEWPID,
    libc::CLONE_NEWNET,
    libc::CLONE_NEWIPC,
    libc::CLONE_NEWUTS,
    libc::CLONE_NEWCGROUP,
];

fn cond(arg: u8, op: SeccompCmpOp, value: u64) -> Result<SeccompCondition, String> {
    SeccompCondition::new(arg, SeccompCmpArgLen::Dword, op, value)
        .map_err(|e| format!("seccomp rule: {e}"))
}

fn rule(conditions: Vec<SeccompCondition>) -> Result<SeccompRule, String> {
    SeccompRule::new(conditions).map_err(|e| format!("seccomp rule: {e}"))
}

fn arch() -> Result<TargetArch, String> {
    TargetArch::try_from(std::env::consts::ARCH).map_err(|_| {
        format!(
            "seccomp filters are not available for {}; strict isolation cannot be enforced",
            std::env::consts::ARCH
        )
    })
}

/// The deny-list program for `level`.
pub(crate) fn deny_program(level: Isolation) -> Result<BpfProgram, String> {
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> =
        DENIED.iter().map(|&n| (n, Vec::new())).collect();
    let mut clone_rules = Vec::new();
    for &flag in NAMESPACE_FLAGS {
        let flag = u64::from(flag.cast_unsigned());
        clone_rules.push(rule(vec![cond(0, SeccompCmpOp::MaskedEq(flag), flag)?])?);
    }
    // Raw and packet sockets: no sniffing or forging traffic. Unix sockets: Landlock (ABI 6)
    // does not cover connecting to a socket file, so none may be created (socketpair, which
    // stays inside the process, remains).
    let mut socket_rules = vec![
        rule(vec![cond(0, SeccompCmpOp::Eq, libc::AF_PACKET as u64)?])?,
        rule(vec![cond(0, SeccompCmpOp::Eq, libc::AF_UNIX as u64)?])?,
        rule(vec![cond(
            1,
            SeccompCmpOp::MaskedEq(0xf),
            libc::SOCK_RAW as u64,
        )?])?,
    ];
    if level >= Isolation::Restricted {
        // No new processes: clone without CLONE_THREAD (threads stay possible), fork, vfork.
        let thread = u64::from(libc::CLONE_THREAD.cast_unsigned());
        clone_rules.push(rule(vec![cond(0, SeccompCmpOp::MaskedEq(thread), 0)?])?);
        rules.insert(libc::SYS_fork, Vec::new());
        rules.insert(libc::SYS_vfork, Vec::new());
        // No network and no sockets at all (socketpair, inside the process, remains).
        socket_rules = Vec::new();
    }
    rules.insert(libc::SYS_clone, clone_rules);
    rules.insert(libc::SYS_socket, socket_rules);
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EPERM.cast_unsigned()),
        arch()?,
    )
    .map_err(|e| format!("seccomp filter: {e}"))?;
    filter
        .try_into()
        .map_err(|e| format!("seccomp filter: {e:?}"))
}

fn clone3_program() -> Result<BpfProgram, String> {
    let rules = BTreeMap::from([(libc::SYS_clone3, Vec::new())]);
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::ENOSYS.cast_unsigned()),
        arch()?,
    )
    .map_err(|e| format!("seccomp filter: {e}"))?;
    filter
        .try_into()
        .map_err(|e| format!("seccomp filter: {e:?}"))
}

/// Installs both filters on the calling (single) thread; `no_new_privs` must already be set.
pub(crate) fn apply(level: Isolation) -> Result<(), String> {
    for program in [deny_program(level)?, clone3_program()?] {
        seccompiler::apply_filter(&program).map_err(|e| {
            format!(
                "could not install the seccomp filter ({level} isolation needs seccomp-BPF): {e}"
            )
        })?;
    }
    Ok(())
}
