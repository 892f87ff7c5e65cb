//! The main node's side of the cluster: `link`, a `RemoteNode` actor per linked node's
//! link; `membership`, which nodes may link and as which row, and how they leave (OFFLINE
//! after missed heartbeats, revoked, removed), their jobs going back to the queue. What
//! the rest of the node uses is named here.

pub mod link;
pub mod membership;
pub mod parts;
pub mod span_claims;
pub mod span_transfer;
pub mod transfer;

pub use self::link::RemoteNode;
pub use self::membership::{
    mark_linked_nodes_offline, remove_node, requeue_unclaimed, revoke_node, watch_links, AskLibraries, ClusterConfig,
    LinkAuth, Links, NodeChange,
};
