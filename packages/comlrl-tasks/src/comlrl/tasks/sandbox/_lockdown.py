"""OS-level confinement the sandbox child applies to itself (stdlib only, run before any job code).

Each function either applies its layer or raises ``OSError``; the harness decides whether a
failure is fatal (a normal run) or only recorded (the one-off probe of what this OS allows).
"""

import ctypes
import os
import resource
import signal

import _seccomp

MIB = 1024 * 1024

# mount(2) flags (linux/mount.h).
_MS_RDONLY, _MS_NOSUID, _MS_NODEV, _MS_NOEXEC = 1, 2, 4, 8
_MS_REMOUNT, _MS_BIND, _MS_REC, _MS_PRIVATE = 32, 4096, 16384, 1 << 18
_MS_NOATIME, _MS_NODIRATIME, _MS_RELATIME = 1024, 2048, 1 << 21
_MNT_DETACH = 2
# statvfs f_flag bits that a bind remount inside a user namespace must keep (they are locked).
_ST_TO_MS = {1: _MS_RDONLY, 2: _MS_NOSUID, 4: _MS_NODEV, 8: _MS_NOEXEC, 1024: _MS_NOATIME}
_ST_TO_MS.update({2048: _MS_NODIRATIME, 4096: _MS_RELATIME})
# pivot_root's number differs by architecture; elsewhere the new root is reported missing.
_SYS_PIVOT_ROOT = {"x86_64": 155, "aarch64": 41, "riscv64": 41, "ppc64le": 203, "s390x": 217}
_DEVICES = ("/dev/null", "/dev/zero", "/dev/urandom", "/dev/random")

# Landlock (linux/landlock.h); the syscall numbers are the same on every architecture.
_SYS_CREATE_RULESET, _SYS_ADD_RULE, _SYS_RESTRICT_SELF = 444, 445, 446
_RULE_PATH_BENEATH = 1
_FS_EXECUTE, _FS_WRITE_FILE, _FS_READ_FILE, _FS_READ_DIR = 1, 2, 4, 8
_FS_RIGHTS_V1 = (1 << 13) - 1
_FS_REFER, _FS_TRUNCATE, _FS_IOCTL_DEV = 1 << 13, 1 << 14, 1 << 15
_NET_BIND_TCP, _NET_CONNECT_TCP = 1, 2
_SCOPE_ABSTRACT_UNIX, _SCOPE_SIGNAL = 1, 2

_PR_SET_PDEATHSIG = 1
_PR_SET_DUMPABLE, _PR_CAPBSET_DROP, _PR_SET_SECUREBITS = 4, 24, 28
_PR_SET_NO_NEW_PRIVS, _PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL = 38, 47, 4
# SECBIT_NOROOT, NO_SETUID_FIXUP, KEEP_CAPS_LOCKED, NO_CAP_AMBIENT_RAISE, each with its lock bit.
_SECUREBITS = 0b1 | 0b10 | 0b100 | 0b1000 | 0b100000 | 0b1000000 | 0b10000000
_SYS_CAPSET = {"x86_64": 126, "aarch64": 91, "riscv64": 91, "ppc64le": 184, "s390x": 185}
_CAP_VERSION_3 = 0x20080522

_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long
_libc.mount.argtypes = [ctypes.c_char_p] * 3 + [ctypes.c_ulong, ctypes.c_char_p]


def _check(result, what):
    if result < 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"{what}: {os.strerror(errno)}")
    return result


def _syscall_number(table, name):
    number = table.get(os.uname().machine)
    if number is None:
        raise OSError(0, f"the {name} syscall number is not known for {os.uname().machine}")
    return number


def _mount(source, target, fstype, flags, data=None):
    enc = [None if v is None else v.encode() for v in (source, target, fstype, data)]
    _check(_libc.mount(enc[0], enc[1], enc[2], flags, enc[3]), f"mount {target}")


def _locked_flags(path):
    flags = os.statvfs(path).f_flag
    return sum(ms for st, ms in _ST_TO_MS.items() if flags & st)


def _bind(source, newroot, readonly=True):
    target = newroot + source
    if os.path.isdir(source):
        os.makedirs(target, exist_ok=True)
    else:
        os.makedirs(os.path.dirname(target), exist_ok=True)
        with open(target, "a"):
            pass
    _mount(source, target, None, _MS_BIND | _MS_REC)
    if readonly:
        flags = _MS_REMOUNT | _MS_BIND | _MS_RDONLY | _MS_NOSUID | _locked_flags(source)
        _mount(None, target, None, flags)


def hide_tree(newroot, read_roots, workdir, disk_mb, max_files):
    """Make a fresh root holding only ``read_roots`` (read-only), devices, /proc and the work dir.

    Needs the user, mount and PID namespaces the parent's ``unshare`` created. The work dir is a
    size-limited tmpfs, so its total disk use is bounded by the kernel; the new /proc belongs to
    this PID namespace, so the trainer's processes (and their environments) are not in it.
    """
    pivot_root = _syscall_number(_SYS_PIVOT_ROOT, "pivot_root")
    _mount(None, "/", None, _MS_REC | _MS_PRIVATE)
    _mount("tmpfs", newroot, "tmpfs", _MS_NOSUID | _MS_NODEV, "size=4m,mode=0755")
    for path in read_roots:
        _bind(path, newroot)
    for device in _DEVICES:
        if os.path.exists(device):
            _bind(device, newroot, readonly=False)
    os.makedirs(newroot + "/proc")
    _mount("proc", newroot + "/proc", "proc", _MS_NOSUID | _MS_NODEV | _MS_NOEXEC)
    os.makedirs(newroot + workdir)
    options = f"size={disk_mb}m,nr_inodes={max_files},mode=0700"
    # noexec: a shared library the code writes here cannot be mapped executable and loaded.
    _mount("tmpfs", newroot + workdir, "tmpfs", _MS_NOSUID | _MS_NODEV | _MS_NOEXEC, options)
    os.chdir(newroot)
    # pivot_root(".", ".") stacks the old root under the new one; detaching it leaves only ours.
    _check(_libc.syscall(pivot_root, b".", b"."), "pivot_root")
    _check(_libc.umount2(b".", _MNT_DETACH), "umount old root")
    os.chdir("/")
    _mount(None, "/", None, _MS_REMOUNT | _MS_BIND | _MS_RDONLY | _MS_NOSUID | _MS_NODEV)
    os.chdir(workdir)


def drop_privileges():
    """Drop every capability for good (also across exec), and make the process undumpable.

    Undumpable means a process of the same user cannot read this one's memory through /proc.
    """
    _check(_libc.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0), "prctl(PR_SET_DUMPABLE)")
    _check(_libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "prctl(PR_SET_NO_NEW_PRIVS)")
    cap = 0
    while _libc.prctl(_PR_CAPBSET_DROP, cap, 0, 0, 0) == 0:
        cap += 1
    if cap == 0:
        # Without CAP_SETPCAP nothing could be dropped; only fine if there is nothing to drop.
        if _effective_caps() != 0:
            raise OSError(ctypes.get_errno(), "could not drop the capability bounding set")
        return
    _check(_libc.prctl(_PR_SET_SECUREBITS, _SECUREBITS, 0, 0, 0), "prctl(PR_SET_SECUREBITS)")
    _check(_libc.prctl(_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0), "clear ambient caps")
    capset = _syscall_number(_SYS_CAPSET, "capset")
    header = (ctypes.c_uint32 * 2)(_CAP_VERSION_3, 0)
    data = (ctypes.c_uint32 * 6)()
    _check(_libc.syscall(capset, ctypes.byref(header), ctypes.byref(data)), "capset")
    if _effective_caps() != 0:
        raise OSError(0, "capabilities are still effective after capset")


def _effective_caps():
    with open("/proc/self/status", encoding="ascii") as handle:
        for line in handle:
            if line.startswith("CapEff:"):
                return int(line.split()[1], 16)
    return 0


def apply_landlock(read_roots, workdir):
    """Allow reads only beneath ``read_roots``, everything beneath ``workdir``, and no TCP.

    Returns the Landlock ABI used, or 0 when the kernel has no Landlock.
    """
    abi = _libc.syscall(_SYS_CREATE_RULESET, None, ctypes.c_size_t(0), ctypes.c_uint32(1))
    if abi < 1:
        return 0
    fs_rights = _FS_RIGHTS_V1
    fs_rights |= _FS_REFER if abi >= 2 else 0
    fs_rights |= _FS_TRUNCATE if abi >= 3 else 0
    fs_rights |= _FS_IOCTL_DEV if abi >= 5 else 0
    attr = (ctypes.c_uint64 * 3)(fs_rights, 0, 0)
    size = 8
    if abi >= 4:
        attr[1], size = _NET_BIND_TCP | _NET_CONNECT_TCP, 16
    if abi >= 6:
        attr[2], size = _SCOPE_ABSTRACT_UNIX | _SCOPE_SIGNAL, 24
    ruleset = _check(
        _libc.syscall(
            _SYS_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(size), ctypes.c_uint32(0)
        ),
        "landlock_create_ruleset",
    )

    class PathBeneath(ctypes.Structure):
        _pack_ = 1
        _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]

    read = _FS_EXECUTE | _FS_READ_FILE | _FS_READ_DIR
    device = _FS_READ_FILE | _FS_WRITE_FILE | (_FS_TRUNCATE if abi >= 3 else 0)
    device |= _FS_IOCTL_DEV if abi >= 5 else 0
    rules = [(path, read) for path in read_roots]
    rules += [(dev, device) for dev in _DEVICES if os.path.exists(dev)]
    rules.append((workdir, fs_rights & ~_FS_EXECUTE))  # nothing written there is run
    for path, rights in rules:
        if not os.path.isdir(path):
            rights &= _FS_EXECUTE | _FS_WRITE_FILE | _FS_READ_FILE | _FS_TRUNCATE | _FS_IOCTL_DEV
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
        try:
            rule = PathBeneath(rights, fd)
            added = _libc.syscall(_SYS_ADD_RULE, ruleset, _RULE_PATH_BENEATH, ctypes.byref(rule), 0)
            _check(added, f"landlock_add_rule {path}")
        finally:
            os.close(fd)
    _check(_libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "prctl(PR_SET_NO_NEW_PRIVS)")
    _check(_libc.syscall(_SYS_RESTRICT_SELF, ruleset, 0), "landlock_restrict_self")
    os.close(ruleset)
    return abi


def _scope_self():
    """Put this process in a new Landlock domain that scopes signals and abstract sockets.

    Nested inside the judge's domain, so the worker cannot signal the judge (kill, pidfd,
    ``F_SETOWN``) nor reach an abstract Unix socket made outside its own domain.
    """
    attr = (ctypes.c_uint64 * 3)(0, 0, _SCOPE_ABSTRACT_UNIX | _SCOPE_SIGNAL)
    ruleset = _check(
        _libc.syscall(
            _SYS_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(24), ctypes.c_uint32(0)
        ),
        "landlock_create_ruleset (scope)",
    )
    try:
        _check(_libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "prctl(PR_SET_NO_NEW_PRIVS)")
        _check(_libc.syscall(_SYS_RESTRICT_SELF, ruleset, 0), "landlock_restrict_self (scope)")
    finally:
        os.close(ruleset)


# Signals that end a process by default; the judge ignores them before any generated code runs.
_FATAL_NAMES = (
    "SIGHUP", "SIGINT", "SIGQUIT", "SIGTERM", "SIGUSR1", "SIGUSR2", "SIGPIPE", "SIGIO",
    "SIGVTALRM", "SIGPROF", "SIGPWR", "SIGSTKFLT", "SIGTRAP", "SIGXFSZ",
)  # fmt: skip
_REALTIME = range(signal.SIGRTMIN, signal.SIGRTMAX + 1) if hasattr(signal, "SIGRTMIN") else range(0)
FATAL_SIGNALS = tuple(getattr(signal, n) for n in _FATAL_NAMES if hasattr(signal, n))
FATAL_SIGNALS += tuple(_REALTIME)


def ignore_fatal_signals():
    """Ignore every catchable signal that would end the judge (its alarm stays)."""
    for number in FATAL_SIGNALS:
        signal.signal(number, signal.SIG_IGN)


def worker_confinement(scope, seccomp, own_session=True, inet=False):
    """The function the judge runs in each worker between fork and exec.

    It gives the worker a process group of its own (in its own session with ``own_session``;
    without the PID namespace it stays in the judge's session, so the parent can kill all that
    is left of the run by session), kills it with the judge, restores the default signal
    actions, then adds the worker's own layers: a nested Landlock domain scoping signals and
    abstract sockets (``scope``, Landlock ABI 6) and the seccomp filter (``seccomp``; ``inet``
    lets it allow IPv4/IPv6 sockets, only inside the run's network namespace). Any failure
    raises, and the worker is not started.
    """

    def confine():
        if own_session:
            os.setsid()
        else:
            os.setpgid(0, 0)
        _check(_libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0), "prctl(PDEATHSIG)")
        for number in FATAL_SIGNALS:
            signal.signal(number, signal.SIG_DFL)
        if scope:
            _scope_self()
        if seccomp:
            _seccomp.install(os.getpid(), inet)

    return confine


def prefer_for_oom_kill():
    """Make this process (and what it starts) the first the kernel's OOM killer picks."""
    with open("/proc/self/oom_score_adj", "w", encoding="ascii") as handle:
        handle.write("1000")


def join_cgroup(path):
    """Move this process into the run's cgroup (``path``, made by the parent), so everything it
    starts is counted against the run's ``memory.max`` and ``pids.max``."""
    with open(os.path.join(path, "cgroup.procs"), "w", encoding="ascii") as handle:
        handle.write("0")


def landlock_abi():
    """The kernel's Landlock ABI version, or 0 without Landlock."""
    return max(0, _libc.syscall(_SYS_CREATE_RULESET, None, ctypes.c_size_t(0), ctypes.c_uint32(1)))


def apply_rlimits(limits):
    """Set hard limits (soft == hard, so they cannot be raised again)."""
    file_size = min(int(limits["file_size_mb"]), int(limits["disk_mb"])) * MIB
    pairs = [
        (resource.RLIMIT_CORE, 0),
        (resource.RLIMIT_CPU, int(limits["cpu_seconds"])),
        (resource.RLIMIT_FSIZE, file_size),
        (resource.RLIMIT_NPROC, int(limits["max_processes"])),
        (resource.RLIMIT_NOFILE, int(limits["max_open_files"])),
        (resource.RLIMIT_AS, int(limits["memory_mb"]) * MIB),
    ]
    for kind, value in pairs:
        resource.setrlimit(kind, (value, value))
