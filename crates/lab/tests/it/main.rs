//! The lab's integration tests, one binary: churn schedules and report rendering from fixtures.

mod churn;
mod report;
mod rounds;
