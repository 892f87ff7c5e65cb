//! Now, as the encoding windows read it (`domain::schedule`): the system clock, or one set
//! by hand, which the tests inject to open and close a window without waiting for it.

use std::sync::{Arc, Mutex};

use chrono::{DateTime, Utc};

#[derive(Debug, Clone, Default)]
pub struct Clock {
    manual: Option<Arc<Mutex<DateTime<Utc>>>>,
}

impl Clock {
    /// The system clock.
    pub fn system() -> Clock {
        Clock::default()
    }

    /// A clock that shows `at` until it is `set` to another time.
    pub fn manual(at: DateTime<Utc>) -> Clock {
        Clock { manual: Some(Arc::new(Mutex::new(at))) }
    }

    /// Sets a manual clock (shared by its clones); the system clock ignores it.
    pub fn set(&self, at: DateTime<Utc>) {
        if let Some(manual) = &self.manual {
            *manual.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = at;
        }
    }

    pub fn now(&self) -> DateTime<Utc> {
        match &self.manual {
            Some(manual) => *manual.lock().unwrap_or_else(std::sync::PoisonError::into_inner),
            None => Utc::now(),
        }
    }
}
