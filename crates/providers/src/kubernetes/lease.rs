//! Leader election on a coordination.k8s.io/v1 Lease, so one replica at a time writes status.
//!
//! The rules are client-go's: a holder renews its Lease every retry period; a replica may take
//! the Lease when it is unheld or when it has not changed for a whole lease duration *as
//! observed on this replica's own clock* (so clock skew between nodes does not matter); every
//! write carries the resourceVersion read, so two replicas can never both win. A holder that
//! cannot renew for a lease duration stops acting as leader before anyone else may take over;
//! on a clean stop it releases the Lease so a successor takes over at its next try.

use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::Timestamp;
use kube::api::PostParams;
use kube::{Api, Client};

/// One replica's view of one Lease.
pub(crate) struct Election {
    api: Api<Lease>,
    name: String,
    identity: String,
    duration: Duration,
    /// The Lease as last read or written, and when this replica saw it change.
    observed: Option<(Lease, Instant)>,
    /// When this replica last renewed successfully, while it believes it leads.
    renewed: Option<Instant>,
}

impl Election {
    pub(crate) fn new(
        client: Client,
        namespace: &str,
        name: &str,
        identity: &str,
        duration: Duration,
    ) -> Election {
        Election {
            api: Api::namespaced(client, namespace),
            name: name.to_owned(),
            identity: identity.to_owned(),
            duration,
            observed: None,
            renewed: None,
        }
    }

    /// How often to try: client-go's ratio of retry period to lease duration (2 s of 15 s),
    /// rounded to a friendlier quarter.
    pub(crate) fn retry_period(&self) -> Duration {
        self.duration / 4
    }

    /// Whether this replica may act as leader right now (without asking the API server).
    pub(crate) fn is_leader(&self) -> bool {
        // Stop leading before the Lease can expire for others: renewals failed for 2/3 of it.
        self.renewed
            .is_some_and(|at| at.elapsed() < self.duration * 2 / 3)
    }

    /// Acquires or renews the Lease; returns whether this replica leads afterwards.
    pub(crate) async fn try_acquire_or_renew(&mut self) -> Result<bool, kube::Error> {
        let now = Instant::now();
        let current = self.api.get_opt(&self.name).await?;
        let Some(current) = current else {
            let lease = self.record(None, 0);
            return self.write(self.api.create(&PostParams::default(), &lease).await);
        };
        self.observe(&current, now);
        let spec = current.spec.clone().unwrap_or_default();
        let holder = spec.holder_identity.as_deref().unwrap_or_default();
        let transitions = spec.lease_transitions.unwrap_or(0);
        if holder == self.identity {
            let mut lease = self.record(spec.acquire_time, transitions);
            lease.metadata.resource_version = current.metadata.resource_version;
            return self.write(
                self.api
                    .replace(&self.name, &PostParams::default(), &lease)
                    .await,
            );
        }
        let expired = self
            .observed
            .as_ref()
            .is_some_and(|(_, seen)| now.duration_since(*seen) >= self.lease_duration_of(&spec));
        if holder.is_empty() || expired {
            let mut lease = self.record(None, transitions + 1);
            lease.metadata.resource_version = current.metadata.resource_version;
            return self.write(
                self.api
                    .replace(&self.name, &PostParams::default(), &lease)
                    .await,
            );
        }
        self.renewed = None;
        Ok(false)
    }

    /// The current holder, as last seen.
    pub(crate) fn holder(&self) -> Option<&str> {
        self.observed
            .as_ref()
            .and_then(|(lease, _)| lease.spec.as_ref()?.holder_identity.as_deref())
    }

    /// Gives the Lease up if this replica holds it, so a successor need not wait for it to
    /// expire. Best effort: on failure the Lease simply expires.
    pub(crate) async fn release(&mut self) {
        if self.renewed.take().is_none() {
            return;
        }
        let Some((mut lease, _)) = self.observed.take() else {
            return;
        };
        if let Some(spec) = lease.spec.as_mut() {
            spec.holder_identity = None;
            spec.lease_duration_seconds = Some(1);
            spec.renew_time = Some(MicroTime(Timestamp::now()));
        }
        lease.metadata.managed_fields = None;
        match self
            .api
            .replace(&self.name, &PostParams::default(), &lease)
            .await
        {
            Ok(_) => tracing::info!(lease = %self.name, "released leadership"),
            Err(error) => {
                tracing::warn!(lease = %self.name, "could not release the Lease: {error}; it expires by itself")
            }
        }
    }

    fn record(&self, acquired: Option<MicroTime>, transitions: i32) -> Lease {
        let now = MicroTime(Timestamp::now());
        Lease {
            metadata: ObjectMeta {
                name: Some(self.name.clone()),
                ..ObjectMeta::default()
            },
            spec: Some(LeaseSpec {
                holder_identity: Some(self.identity.clone()),
                lease_duration_seconds: Some(self.duration.as_secs().max(1) as i32),
                acquire_time: Some(acquired.unwrap_or_else(|| now.clone())),
                renew_time: Some(now),
                lease_transitions: Some(transitions),
                ..LeaseSpec::default()
            }),
        }
    }

    /// Notes when the Lease last changed, by our clock.
    fn observe(&mut self, lease: &Lease, now: Instant) {
        let unchanged = self.observed.as_ref().is_some_and(|(seen, _)| {
            seen.metadata.resource_version == lease.metadata.resource_version
        });
        if !unchanged {
            self.observed = Some((lease.clone(), now));
        }
    }

    fn lease_duration_of(&self, spec: &LeaseSpec) -> Duration {
        spec.lease_duration_seconds
            .and_then(|s| u64::try_from(s).ok())
            .map_or(self.duration, Duration::from_secs)
    }

    fn write(&mut self, result: Result<Lease, kube::Error>) -> Result<bool, kube::Error> {
        match result {
            Ok(lease) => {
                self.observed = Some((lease, Instant::now()));
                self.renewed = Some(Instant::now());
                Ok(true)
            }
            // Someone else wrote first: they lead; we look again next period.
            Err(kube::Error::Api(status)) if status.is_conflict() || status.is_already_exists() => {
                self.renewed = None;
                Ok(false)
            }
            Err(error) => Err(error),
        }
    }
}
