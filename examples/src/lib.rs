//! Holder package for the examples in this folder; see three_ways.rs.
