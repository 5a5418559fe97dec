//! The explicit task state machine (docs/protocol.md "A2A methods"): every transition is checked, terminal is final.

use crate::types::TaskState;

impl TaskState {
    /// COMPLETED, FAILED, CANCELED, REJECTED: never changes again.
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            Self::Completed | Self::Failed | Self::Canceled | Self::Rejected
        )
    }

    /// SUBMITTED, WORKING, INPUT_REQUIRED, AUTH_REQUIRED: the task is not over.
    pub const ACTIVE: [TaskState; 4] = [
        Self::Submitted,
        Self::Working,
        Self::InputRequired,
        Self::AuthRequired,
    ];

    /// One of [`Self::ACTIVE`].
    pub fn is_active(self) -> bool {
        Self::ACTIVE.contains(&self)
    }

    /// SUBMITTED, WORKING: a turn is (or should be) running.
    pub fn is_running(self) -> bool {
        matches!(self, Self::Submitted | Self::Working)
    }

    /// INPUT_REQUIRED, AUTH_REQUIRED: waiting for the client; a message with the task id continues it.
    pub fn is_interrupted(self) -> bool {
        matches!(self, Self::InputRequired | Self::AuthRequired)
    }

    /// Whether `self → to` is allowed.
    pub fn can_become(self, to: TaskState) -> bool {
        use TaskState::*;
        match (self, to) {
            (_, Unspecified) | (Unspecified, _) => false,
            (from, _) if from.is_terminal() => false,
            // A new turn starts from SUBMITTED or an interrupted state; WORKING may repeat (a status message).
            (Submitted | Working | InputRequired | AuthRequired, Working) => true,
            (Submitted | Working, InputRequired | AuthRequired) => true,
            // Any live task can end; an interrupted one only by cancel, failure or timeout.
            (Submitted | Working, Completed | Rejected) => true,
            (_, Failed | Canceled) => true,
            _ => false,
        }
    }

    /// `self → to`, or an error naming both.
    pub fn transition(self, to: TaskState) -> Result<TaskState, TransitionError> {
        if self.can_become(to) {
            Ok(to)
        } else {
            Err(TransitionError { from: self, to })
        }
    }
}

/// A refused transition.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TransitionError {
    /// Current state.
    pub from: TaskState,
    /// Requested state.
    pub to: TaskState,
}

impl std::fmt::Display for TransitionError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "a task in {} cannot become {}",
            self.from.as_str(),
            self.to.as_str()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use TaskState::*;

    const STATES: [TaskState; 9] = [
        Unspecified,
        Submitted,
        Working,
        Completed,
        Failed,
        Canceled,
        InputRequired,
        Rejected,
        AuthRequired,
    ];

    /// The whole table, written out: (from, [allowed targets]).
    fn allowed(from: TaskState) -> &'static [TaskState] {
        match from {
            Submitted => &[
                Working,
                Completed,
                Failed,
                Canceled,
                InputRequired,
                Rejected,
                AuthRequired,
            ],
            Working => &[
                Working,
                Completed,
                Failed,
                Canceled,
                InputRequired,
                Rejected,
                AuthRequired,
            ],
            InputRequired | AuthRequired => &[Working, Failed, Canceled],
            Unspecified | Completed | Failed | Canceled | Rejected => &[],
        }
    }

    #[test]
    fn every_transition_matches_the_table() {
        for from in STATES {
            for to in STATES {
                let expect = allowed(from).contains(&to);
                assert_eq!(from.can_become(to), expect, "{from:?} -> {to:?}");
                assert_eq!(from.transition(to).is_ok(), expect, "{from:?} -> {to:?}");
            }
        }
    }

    #[test]
    fn terminal_states_are_final() {
        for s in [Completed, Failed, Canceled, Rejected] {
            assert!(s.is_terminal());
            assert!(STATES.iter().all(|to| !s.can_become(*to)));
        }
        for s in [Submitted, Working, InputRequired, AuthRequired] {
            assert!(!s.is_terminal());
        }
        for s in STATES {
            assert_eq!(s.is_active(), !s.is_terminal() && s != Unspecified, "{s:?}");
            assert_eq!(
                s.is_running(),
                s.is_active() && !s.is_interrupted(),
                "{s:?}"
            );
        }
    }

    #[test]
    fn a_landed_cancel_is_never_overwritten_by_a_late_completion() {
        let canceled = Working.transition(Canceled).unwrap();
        let err = canceled.transition(Completed).unwrap_err();
        assert_eq!(
            err.to_string(),
            "a task in TASK_STATE_CANCELED cannot become TASK_STATE_COMPLETED"
        );
    }

    #[test]
    fn interrupted_states() {
        assert!(InputRequired.is_interrupted() && AuthRequired.is_interrupted());
        assert!(!Working.is_interrupted() && !Completed.is_interrupted());
    }
}
