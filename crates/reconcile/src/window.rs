//! The window `[from, to)` (CONTRACT §10): without `--from`, the journal's earliest
//! `booked_at`; without `--to`, one second after its latest; a bound given alone replaces
//! only its own default. An empty journal needs both bounds; `from ≥ to` is refused.

use crate::time::{Secs, format_rfc3339};

/// `[from, to)`, in seconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    pub from: Secs,
    pub to: Secs,
}

/// Why there is no window (a usage error).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WindowError {
    /// The journal has no booking and a bound was not given.
    #[error("the journal holds no booking: give both --from and --to")]
    EmptyJournal,
    /// `from ≥ to`.
    #[error(
        "the window is empty: from {} is not before to {}",
        format_rfc3339(*.from),
        format_rfc3339(*.to)
    )]
    Empty { from: Secs, to: Secs },
}

impl Window {
    /// The window from the bounds given and the journal's span (earliest, latest).
    pub fn decide(
        from: Option<Secs>,
        to: Option<Secs>,
        span: Option<(Secs, Secs)>,
    ) -> Result<Window, WindowError> {
        let from = from
            .or(span.map(|s| s.0))
            .ok_or(WindowError::EmptyJournal)?;
        let to = to
            .or(span.map(|s| s.1 + 1))
            .ok_or(WindowError::EmptyJournal)?;
        if from >= to {
            return Err(WindowError::Empty { from, to });
        }
        Ok(Window { from, to })
    }

    pub fn contains(&self, t: Secs) -> bool {
        self.from <= t && t < self.to
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_and_bounds() {
        let span = Some((100, 200));
        assert_eq!(
            Window::decide(None, None, span),
            Ok(Window { from: 100, to: 201 })
        );
        assert_eq!(
            Window::decide(Some(150), None, span),
            Ok(Window { from: 150, to: 201 })
        );
        assert_eq!(
            Window::decide(None, Some(150), span),
            Ok(Window { from: 100, to: 150 })
        );
        assert_eq!(
            Window::decide(None, Some(100), span),
            Err(WindowError::Empty { from: 100, to: 100 })
        );
        assert_eq!(
            Window::decide(Some(1), None, None),
            Err(WindowError::EmptyJournal)
        );
        assert_eq!(
            Window::decide(Some(1), Some(2), None),
            Ok(Window { from: 1, to: 2 })
        );
        let w = Window { from: 1, to: 2 };
        assert!(w.contains(1) && !w.contains(2) && !w.contains(0));
    }
}
