//! Memory-mapped files that survive truncation: a process-wide SIGBUS guard and the mappings it
//! protects.
//!
//! The classic failure: the daemon maps a file, another process truncates it, and the next
//! access to a page past the new end raises SIGBUS, which kills the process. (MAP_PRIVATE does
//! not help: pages not yet copied still come from the file.) The guard, after Sapling's
//! `indexedlog/src/sigbus.rs` and systemd's `src/basic/sigbus.c`:
//!
//! - Every live mapping is registered in a fixed, lock-free table (start, length, torn flag)
//!   before anyone reads it, and unregistered *before* it is unmapped.
//! - The SIGBUS handler looks the faulting address up in that table. Only for `BUS_ADRERR`
//!   inside a registered mapping does it act: it maps an anonymous zero page over the faulting
//!   page (`MAP_FIXED`), marks the mapping torn and returns, so the faulting instruction reads
//!   zeros instead of dying. Every other SIGBUS goes to the handler that was installed before
//!   ours (Rust's own, for stack overflows, included); when that was the default action, the
//!   default is restored and the fault, re-executed, takes it. `errno` is saved and restored.
//! - A read copies what it needs out of the mapping and then asks whether the mapping was torn
//!   (and the provider re-checks the file's fingerprint): a torn read is never returned as data.
//!   A torn mapping is dropped and the file is mapped again on the next access.
//!
//! The handler only touches atomics and calls `mmap`, `sigaction` and the previous handler, all
//! async-signal-safe.
#![allow(unsafe_code)]

use std::fs::File;
use std::sync::Once;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicUsize, Ordering};

/// Most mappings alive at once; when the table is full, files are read without mapping.
pub const MAX_MAPPINGS: usize = 512;

struct Slot {
    start: AtomicUsize,
    len: AtomicUsize,
    torn: AtomicBool,
}

#[allow(clippy::declare_interior_mutable_const)]
const EMPTY_SLOT: Slot =
    Slot { start: AtomicUsize::new(0), len: AtomicUsize::new(0), torn: AtomicBool::new(false) };

static SLOTS: [Slot; MAX_MAPPINGS] = [EMPTY_SLOT; MAX_MAPPINGS];
static PAGE_SIZE: AtomicUsize = AtomicUsize::new(4096);
/// The SIGBUS action installed before ours (leaked once, read by the handler).
static PREVIOUS: AtomicPtr<libc::sigaction> = AtomicPtr::new(std::ptr::null_mut());
static INSTALL: Once = Once::new();
/// Faults turned into torn reads since start (for tests and logs).
static TORN_READS: AtomicUsize = AtomicUsize::new(0);

/// Installs the SIGBUS guard once per process. Returns whether it is in place.
pub fn install_sigbus_guard() -> bool {
    static OK: AtomicBool = AtomicBool::new(false);
    INSTALL.call_once(|| {
        // SAFETY: sysconf has no preconditions.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
        if page > 0 {
            PAGE_SIZE.store(page as usize, Ordering::Relaxed);
        }
        // SAFETY: an all-zero sigaction is a valid value (empty mask, no flags, SIG_DFL).
        let mut previous: Box<libc::sigaction> = Box::new(unsafe { std::mem::zeroed() });
        // SAFETY: as above.
        let mut action: libc::sigaction = unsafe { std::mem::zeroed() };
        action.sa_sigaction = on_sigbus as *const () as usize;
        // SA_NODEFER: a fault in the previous handler we chain to is not blocked.
        action.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK | libc::SA_NODEFER;
        // SAFETY: `action.sa_mask` is a valid sigset_t to initialise.
        unsafe { libc::sigemptyset(&mut action.sa_mask) };
        let previous_ptr: *mut libc::sigaction = &mut *previous;
        // Publish where the previous action will be stored before the handler can run.
        PREVIOUS.store(Box::into_raw(previous), Ordering::Release);
        // SAFETY: both pointers are valid for the call; the previous action is written into
        // memory leaked for the life of the process, which the handler reads.
        let rc = unsafe { libc::sigaction(libc::SIGBUS, &action, previous_ptr) };
        OK.store(rc == 0, Ordering::Release);
    });
    OK.load(Ordering::Acquire)
}

/// Faults turned into torn reads since the process started.
pub fn torn_reads() -> usize {
    TORN_READS.load(Ordering::Relaxed)
}

extern "C" fn on_sigbus(signal: libc::c_int, info: *mut libc::siginfo_t, context: *mut libc::c_void) {
    // SAFETY: errno is thread-local and always addressable.
    let saved_errno = unsafe { *libc::__errno_location() };
    // SAFETY: the kernel passes a valid siginfo_t for SA_SIGINFO handlers.
    let (code, addr) = match unsafe { info.as_ref() } {
        Some(info) => (info.si_code, unsafe { info.si_addr() } as usize),
        None => (0, 0),
    };
    if code == libc::BUS_ADRERR && zero_fill(addr) {
        // SAFETY: as above.
        unsafe { *libc::__errno_location() = saved_errno };
        return;
    }
    chain(signal, info, context);
    // SAFETY: as above.
    unsafe { *libc::__errno_location() = saved_errno };
}

/// Maps a zero page over `addr` if it lies in a registered mapping; marks that mapping torn.
fn zero_fill(addr: usize) -> bool {
    let page = PAGE_SIZE.load(Ordering::Relaxed);
    for slot in &SLOTS {
        let start = slot.start.load(Ordering::Acquire);
        let len = slot.len.load(Ordering::Acquire);
        if start == 0 || len == 0 || addr < start || addr >= start + len {
            continue;
        }
        let base = addr & !(page - 1);
        // SAFETY: the page lies inside a mapping we own and registered; replacing it with an
        // anonymous read-only zero page keeps the address range mapped for its owner.
        let mapped = unsafe {
            libc::mmap(
                base as *mut libc::c_void,
                page,
                libc::PROT_READ,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED,
                -1,
                0,
            )
        };
        if mapped == libc::MAP_FAILED {
            return false;
        }
        slot.torn.store(true, Ordering::Release);
        TORN_READS.fetch_add(1, Ordering::Relaxed);
        return true;
    }
    false
}

/// Hands a fault that is not ours to the previous handler.
fn chain(signal: libc::c_int, info: *mut libc::siginfo_t, context: *mut libc::c_void) {
    let previous = PREVIOUS.load(Ordering::Acquire);
    // SAFETY: set once in `install` to a leaked, fully written sigaction before ours was
    // installed; never freed.
    let Some(previous) = (unsafe { previous.as_ref() }) else { return };
    let handler = previous.sa_sigaction;
    if handler == libc::SIG_IGN {
        return;
    }
    if handler == libc::SIG_DFL {
        // SAFETY: restoring the previous (default) action; returning re-executes the faulting
        // instruction, which then takes the default action, as if we had never been here.
        unsafe { libc::sigaction(signal, previous, std::ptr::null_mut()) };
        return;
    }
    if previous.sa_flags & libc::SA_SIGINFO != 0 {
        // SAFETY: the previous handler was installed with SA_SIGINFO, so it has this signature.
        let f: extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void) =
            unsafe { std::mem::transmute(handler) };
        f(signal, info, context);
    } else {
        // SAFETY: a handler installed without SA_SIGINFO takes only the signal number.
        let f: extern "C" fn(libc::c_int) = unsafe { std::mem::transmute(handler) };
        f(signal);
    }
}

/// A read-only mapping of a whole file, registered with the guard for as long as it lives.
pub struct Mapped {
    map: std::mem::ManuallyDrop<memmap2::Mmap>,
    slot: usize,
    /// The mapped-bytes budget this mapping holds; given back after it is unmapped.
    reservation: Option<super::budget::Reservation>,
}

impl std::fmt::Debug for Mapped {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Mapped").field("len", &self.map.len()).field("torn", &self.torn()).finish()
    }
}

impl Mapped {
    /// Maps `file` (`len` bytes) if the guard is installed and a table slot is free.
    pub fn map(file: &File, len: u64) -> std::io::Result<Option<Mapped>> {
        let Ok(len) = usize::try_from(len) else { return Ok(None) };
        if len == 0 || !install_sigbus_guard() {
            return Ok(None);
        }
        // SAFETY: the mapping may change or shrink under us when other processes write or
        // truncate the file. It is registered with the SIGBUS guard before any byte is read,
        // so a read past a new end yields zeros and a torn flag instead of a crash, and every
        // reader copies bytes out and checks `torn()` (and the file's fingerprint) before
        // trusting what it copied.
        let map = unsafe { memmap2::MmapOptions::new().len(len).map(file)? };
        let start = map.as_ptr() as usize;
        for (i, slot) in SLOTS.iter().enumerate() {
            if slot.start.compare_exchange(0, start, Ordering::AcqRel, Ordering::Acquire).is_ok() {
                slot.torn.store(false, Ordering::Release);
                slot.len.store(len, Ordering::Release);
                return Ok(Some(Mapped {
                    map: std::mem::ManuallyDrop::new(map),
                    slot: i,
                    reservation: None,
                }));
            }
        }
        Ok(None)
    }

    /// The mapped bytes. They may change (or turn to zeros) while being read: callers copy
    /// what they need and check [`Mapped::torn`] before trusting it.
    pub fn bytes(&self) -> &[u8] {
        &self.map
    }

    /// Whether any read of this mapping hit a page past the file's end.
    pub fn torn(&self) -> bool {
        SLOTS[self.slot].torn.load(Ordering::Acquire)
    }

    /// Makes this mapping hold `reservation` until it is unmapped.
    pub fn hold(&mut self, reservation: super::budget::Reservation) {
        self.reservation = Some(reservation);
    }

    /// Hints the kernel that the mapping will be read from start to end.
    pub fn advise_sequential(&self) {
        let _ = self.map.advise(memmap2::Advice::Sequential);
    }

    /// Mapped length in bytes.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// Whether the mapping is empty (never: empty files are not mapped).
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }
}

impl Drop for Mapped {
    fn drop(&mut self) {
        let slot = &SLOTS[self.slot];
        // Unregister before unmapping: the range may be reused by the next mmap.
        slot.len.store(0, Ordering::Release);
        slot.start.store(0, Ordering::Release);
        // SAFETY: dropped exactly once, here; nothing reads `map` afterwards.
        unsafe { std::mem::ManuallyDrop::drop(&mut self.map) };
    }
}

/// Whether a file lives on a filesystem where mapping is sound and worthwhile: local ones.
/// Network and userspace filesystems (NFS, SMB/CIFS, FUSE, 9p, Ceph, AFS, …) get positional
/// reads: their pages can vanish or change without notice.
pub fn mappable(file: impl std::os::fd::AsFd) -> bool {
    rustix::fs::fstatfs(file).is_ok_and(|stat| local(&stat))
}

/// Whether the folder or file at `path` is on a local filesystem (as [`mappable`] decides).
pub fn local_path(path: &std::path::Path) -> bool {
    rustix::fs::statfs(path).is_ok_and(|stat| local(&stat))
}

fn local(stat: &rustix::fs::StatFs) -> bool {
    const REMOTE: &[i64] = &[
        0x6969,      // NFS
        0x517B,      // SMB
        0xFF53_4D42, // CIFS
        0xFE53_4D42, // SMB2
        0x6573_5546, // FUSE
        0x0102_1997, // 9P
        0x00C3_6400, // CEPH
        0x5346_414F, // AFS
        0x7375_7245, // CODA
        0x564C,      // NCP
        0x0BD0_0BD0, // LUSTRE
        0x1373,      // DEVFS
        0x9FA0,      // PROC
        0x6265_6572, // SYSFS
    ];
    // `f_type` is a C long on some targets and an int on others.
    #[allow(clippy::unnecessary_cast)]
    let kind = stat.f_type as i64;
    !REMOTE.contains(&kind)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn truncation_under_a_mapping_is_a_torn_read_not_a_crash() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let page = PAGE_SIZE.load(Ordering::Relaxed).max(4096);
        let mut file = File::create(&path).unwrap();
        file.write_all(&vec![b'a'; page * 8]).unwrap();
        let file = File::open(&path).unwrap();
        let mapped = Mapped::map(&file, (page * 8) as u64).unwrap().expect("mapped");
        assert!(!mapped.torn());
        assert_eq!(mapped.bytes()[page * 7], b'a');
        // Another writer truncates the file under the mapping.
        std::fs::OpenOptions::new().write(true).open(&path).unwrap().set_len(page as u64).unwrap();
        let copy = mapped.bytes()[page * 6..page * 7].to_vec();
        assert!(mapped.torn(), "the fault was caught and recorded");
        assert!(copy.iter().all(|&b| b == 0));
        assert_eq!(mapped.bytes()[0], b'a', "pages still backed by the file are intact");
        drop(mapped);
        // The slot is free again and a fresh mapping is not torn.
        let again = Mapped::map(&file, page as u64).unwrap().expect("mapped");
        assert!(!again.torn());
    }

    #[test]
    fn local_temp_files_are_mappable() {
        let file = tempfile::tempfile().unwrap();
        assert!(mappable(&file));
    }
}
