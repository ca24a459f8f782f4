//! The harness's own promises that the tests of this binary rely on because they share one
//! process: [`alone`] waits for every daemon of the other tests and holds new ones back until
//! it is dropped, and [`test_name`] names a test as libtest does, for `--exact`.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, mpsc};
use std::time::Duration;

use filectx_tests::{Share, alone, test_name};

/// Only guards against a hang: `alone` may wait for a long test's daemon (or the soak) first.
const HANG: Duration = Duration::from_secs(300);

#[test]
fn alone_waits_for_every_share_and_holds_new_ones_back() {
    let share = Share::take();
    let released = Arc::new(AtomicBool::new(false));
    let (got, has_got) = mpsc::channel();
    let waiter = {
        let released = released.clone();
        std::thread::spawn(move || {
            let guard = alone();
            got.send(()).unwrap();
            std::thread::sleep(Duration::from_millis(200));
            released.store(true, Ordering::SeqCst);
            drop(guard);
        })
    };
    assert!(
        has_got.recv_timeout(Duration::from_millis(300)).is_err(),
        "alone() returned while a share was out"
    );
    drop(share);
    has_got.recv_timeout(HANG).expect("alone() once every share was back");
    let again = Share::take();
    assert!(released.load(Ordering::SeqCst), "a share was taken while a test ran alone");
    drop(again);
    waiter.join().unwrap();
}

#[test]
fn test_name_is_the_module_path_without_the_crate() {
    assert_eq!(test_name(module_path!(), "foreign_peer"), "harness::foreign_peer");
    assert_eq!(test_name("it", "top"), "top");
}
