//! muster: all-or-nothing (gang) scheduling for Kubernetes, as an HTTP extender of the stock
//! kube-scheduler.
#![forbid(unsafe_code)]

pub mod model;
