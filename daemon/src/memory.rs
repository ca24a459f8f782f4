//! Giving freed memory back to the system once the daemon goes quiet.
//!
//! glibc's allocator keeps what the daemon frees (a released cache, a closed session's
//! observations) in its arenas for reuse; without a trim, a daemon that once read 10,000 files
//! keeps that much resident forever. `malloc_trim` hands the free pages of every arena back.
#![allow(unsafe_code)]

/// Tunes the allocator for a daemon that handles whole files of tens or hundreds of KiB per
/// request: allocations up to 4 MiB come from the heap (not a fresh `mmap` each time), and the
/// heap is not shrunk by every `free` at its top (glibc's default 128 KiB trim threshold made
/// each 100 KB edit grow and shrink the heap twice, with a page fault per page). Memory goes
/// back when the daemon is idle instead ([`release_free_memory`], after each idle sweep).
/// Call once at start-up.
pub fn tune() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only sets allocator parameters; it is safe to call at any time, and a
    // refused value (return 0) leaves glibc's default in place, which is still correct.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 4 * 1024 * 1024);
        libc::mallopt(libc::M_TRIM_THRESHOLD, 64 * 1024 * 1024);
    }
}

/// Returns free heap pages to the system (glibc only; elsewhere nothing to do). Takes a moment
/// on a large heap: call it from a blocking thread, rarely.
pub fn release_free_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim has no preconditions: it takes the allocator's own locks and only
    // releases pages that hold no live allocation. Its result (whether anything was released)
    // needs no handling.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Bytes the allocator has handed out and not had back (glibc's `mallinfo2`: every arena's
/// allocations and the big blocks it mapped on its own); `None` elsewhere. What the daemon
/// holds, unlike its resident memory, which also counts the free pages an arena keeps.
pub fn heap_in_use() -> Option<usize> {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        // SAFETY: mallinfo2 has no preconditions: it takes the allocator's own locks and only
        // reads its counters into the struct it returns.
        let info = unsafe { libc::mallinfo2() };
        Some(info.uordblks + info.hblkhd)
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    None
}

/// Makes the whole pages inside `room` resident and writable ahead of the writes that will fill
/// it (`MADV_POPULATE_WRITE`, Linux 5.14 and later): one system call instead of one page fault
/// per 4 KiB page as the writes reach them. Where the kernel refuses (older kernels, other
/// systems), nothing happens and the writes fault their pages in as usual.
pub fn prefault(room: &mut [std::mem::MaybeUninit<u8>]) {
    #[cfg(target_os = "linux")]
    {
        // 4 KiB pages (x86-64, most arm64): elsewhere the range is not page-aligned, the kernel
        // refuses it, and nothing happens.
        let page = 4096;
        let start = room.as_mut_ptr() as usize;
        let first = start.next_multiple_of(page);
        let end = (start + room.len()) / page * page;
        if end > first {
            // SAFETY: [first, end) lies inside `room`, memory the caller holds mutably;
            // MADV_POPULATE_WRITE only faults its pages in, writable, as a write would, and
            // changes no byte anyone can read. A refusal (EINVAL on older kernels) is harmless.
            unsafe {
                libc::madvise(first as *mut libc::c_void, end - first, libc::MADV_POPULATE_WRITE);
            }
        }
    }
}
