//! proxy
