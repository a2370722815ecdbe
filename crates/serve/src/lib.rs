//! schedlab's real world: an HTTP/1.1 static file server whose request queue is ordered by a
//! `schedlab_policy` policy (the same code the simulator runs), and a load generator that
//! measures it over real sockets.
//!
//! - [`server`]: the master thread (accept, parse, resolve, admit) and connection handling;
//! - [`queue`]: the bounded buffer, one `Mutex` and two `Condvar`s, ordered by the policy;
//! - [`worker`]: the worker pool, packet by packet, with the emulated [`cost`];
//! - [`request`], [`shared`]: the connection, the request and its log row; what the master
//!   shares with the workers;
//! - [`park`], [`lot`]: requests whose client's socket is full, off the workers until it
//!   drains (the thread, and its ledger);
//! - [`http`], [`root`]: request parsing (httparse) and safe path resolution (openat2);
//! - [`load`]: closed and open loop generators, file catalogues, Zipf, scripted bursts.

pub mod clock;
pub mod config;
pub mod cost;
pub mod fuzzing;
pub mod http;
pub mod load;
pub mod lot;
pub mod park;
pub mod queue;
pub mod request;
pub mod root;
pub mod server;
pub mod shared;
pub mod worker;

pub use config::{ServeConfig, ServeSpec};
pub use request::Record;
pub use server::{Handle, Server, Stats};
