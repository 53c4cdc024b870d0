//! providers
