//! The simulation of a gang's placement: which members to place (`selection`), the one
//! first-fit loop under kube-scheduler's required rules (`simulation`), and the plan it yields
//! (`planner`). Reads the table; changes nothing.

pub(crate) mod planner;
pub(crate) mod selection;
pub(crate) mod simulation;
