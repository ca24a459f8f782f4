//! Giving freed memory back to the system once the daemon goes quiet.
//!
//! glibc's allocator keeps what the daemon frees (a released cache, a closed session's
//! observations) in its arenas for reuse; without a trim, a daemon that once read 10,000 files
//! keeps that much resident forever. `malloc_trim` hands the free pages of every arena back.
#![allow(unsafe_code)]

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
