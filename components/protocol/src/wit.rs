//! The conversions between protocol types and their WIT counterparts (`wit/edge.wit`), as macros
//! each side of the boundary expands against its own generated bindings: one table per concept,
//! so the guests and the host cannot map a value differently.

/// `From<$wit>` for [`TaskState`](crate::TaskState), and `TryFrom<TaskState>` for `$wit` (the WIT
/// `task-state` enum, named by an identifier in scope). UNSPECIFIED is no state a task can be in:
/// converting it fails with `$refuse` (of type `$error`).
#[macro_export]
macro_rules! wit_task_state {
    ($wit:ident, $error:ty, $refuse:expr) => {
        impl From<$wit> for $crate::TaskState {
            fn from(s: $wit) -> Self {
                match s {
                    $wit::Submitted => Self::Submitted,
                    $wit::Working => Self::Working,
                    $wit::InputRequired => Self::InputRequired,
                    $wit::AuthRequired => Self::AuthRequired,
                    $wit::Completed => Self::Completed,
                    $wit::Failed => Self::Failed,
                    $wit::Canceled => Self::Canceled,
                    $wit::Rejected => Self::Rejected,
                }
            }
        }

        impl TryFrom<$crate::TaskState> for $wit {
            type Error = $error;

            fn try_from(s: $crate::TaskState) -> Result<Self, $error> {
                use $crate::TaskState as S;
                Ok(match s {
                    S::Unspecified => return Err($refuse),
                    S::Submitted => $wit::Submitted,
                    S::Working => $wit::Working,
                    S::InputRequired => $wit::InputRequired,
                    S::AuthRequired => $wit::AuthRequired,
                    S::Completed => $wit::Completed,
                    S::Failed => $wit::Failed,
                    S::Canceled => $wit::Canceled,
                    S::Rejected => $wit::Rejected,
                })
            }
        }
    };
}

/// `From` both ways between `$wit` (the WIT `frame-kind` enum, named by an identifier in scope)
/// and [`sse::Member`](crate::sse::Member).
#[macro_export]
macro_rules! wit_frame_kind {
    ($wit:ident) => {
        impl From<$crate::sse::Member> for $wit {
            fn from(m: $crate::sse::Member) -> Self {
                use $crate::sse::Member as M;
                match m {
                    M::Task => $wit::Task,
                    M::Message => $wit::Message,
                    M::StatusUpdate => $wit::StatusUpdate,
                    M::ArtifactUpdate => $wit::ArtifactUpdate,
                }
            }
        }

        impl From<$wit> for $crate::sse::Member {
            fn from(k: $wit) -> Self {
                match k {
                    $wit::Task => Self::Task,
                    $wit::Message => Self::Message,
                    $wit::StatusUpdate => Self::StatusUpdate,
                    $wit::ArtifactUpdate => Self::ArtifactUpdate,
                }
            }
        }
    };
}
