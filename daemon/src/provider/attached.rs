//! What a layer above the provider keeps for as long as the provider lives, one value per type
//! (the search listings are one): the provider holds it without knowing what it is, so the
//! arrow runs one way only, from the layer above down to the provider.

use std::any::Any;
use std::sync::{Arc, Mutex, PoisonError};

/// Values attached to a provider, at most one of each type.
#[derive(Default)]
pub struct Attached {
    values: Mutex<Vec<Arc<dyn Any + Send + Sync>>>,
}

impl std::fmt::Debug for Attached {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let count = self.values.lock().unwrap_or_else(PoisonError::into_inner).len();
        f.debug_struct("Attached").field("count", &count).finish()
    }
}

impl Attached {
    /// The value of type `T`, made by `make` on first use.
    pub fn get_or_attach<T: Any + Send + Sync>(&self, make: impl FnOnce() -> T) -> Arc<T> {
        let mut values = self.values.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(found) = values.iter().find_map(|value| Arc::clone(value).downcast::<T>().ok()) {
            return found;
        }
        let made = Arc::new(make());
        values.push(Arc::clone(&made) as Arc<dyn Any + Send + Sync>);
        made
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_value_of_each_type_made_once() {
        let attached = Attached::default();
        let first = attached.get_or_attach(|| 7_u32);
        assert_eq!(*attached.get_or_attach(|| 8_u32), 7, "made once");
        assert!(Arc::ptr_eq(&first, &attached.get_or_attach(|| 9_u32)));
        assert_eq!(*attached.get_or_attach(|| "other"), "other", "another type has its own");
    }
}
