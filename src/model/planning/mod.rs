//! The simulation of a gang's placement: which members to place (`selection`), the one
//! first-fit loop under kube-scheduler's required rules (`simulation`), the plan it yields
//! (`planner`), and the bound that refuses at once a quorum the cluster could never hold
//! (`quorum_bound`). Reads the table; changes nothing.

pub(crate) mod domains;
pub(crate) mod planner;
pub(crate) mod quorum_bound;
pub(crate) mod selection;
pub(crate) mod simulation;
