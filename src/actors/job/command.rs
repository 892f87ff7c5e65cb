//! What a running job is told from outside its run: pause, cancel, stop with the node,
//! stop encoding while the node is cut off from the main node, yield to a closed window, or
//! let go of a lease that went to another.

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum JobCommand {
    Pause,
    Cancel,
    /// The node is stopping: finish the current segment and leave the job as it is, to be
    /// continued after the restart.
    Shutdown,
    /// The node's encoding window closed: finish the current segment and put the job back in
    /// the queue, to continue from there when a window opens (`JobEvent::Yield`).
    Yield,
    /// A linked node cut off from the main node for half its timeout fences itself: an
    /// encode stops at a segment boundary and leaves the job as it is, as at `Shutdown`,
    /// since the main node may give the job to another node. A job taken by transfer goes
    /// on in every phase: its copy and partial output are in this node's WORK_DIR, every
    /// request it makes carries the lease, which the main node checks, and the main node
    /// restarting is the very fault it rides out.
    Fence,
    /// The job is no longer this node's (its lease went to another): stop at once, change
    /// nothing.
    LeaseLost,
}
