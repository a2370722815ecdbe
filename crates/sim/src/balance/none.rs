//! No balancing: a task stays where placement put it.

use super::Balancer;

pub struct NoBalancer;

impl Balancer for NoBalancer {}
