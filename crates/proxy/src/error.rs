//! Everything that can go wrong with one proxied request, and the one place that turns it
//! into an HTTP status (STYLE.md #7). Audit the status codes here.

use std::io;
use std::net::SocketAddr;

use bytes::Bytes;
use http::{header, HeaderValue, Response, StatusCode};

use crate::body::ResponseBody;
use crate::client::ClientError;

/// Why a request was answered by the proxy instead of an upstream.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ProxyError {
    #[error("no configuration has been published yet")]
    NotReady,
    #[error("no Ingress rule matches this host and path")]
    NoRoute,
    #[error("the backend has no ready endpoints")]
    NoEndpoints,
    #[error("request body larger than client-max-body-size ({limit} bytes)")]
    BodyTooLarge { limit: u64 },
    #[error("connecting to {addr} took longer than proxy-connect-timeout")]
    ConnectTimeout { addr: SocketAddr },
    #[error("connecting to {addr} failed")]
    Connect {
        addr: SocketAddr,
        #[source]
        source: io::Error,
    },
    /// EMFILE/ENFILE on the socket for an upstream connection: the proxy's own shortage.
    #[error("no file descriptor left for a connection to {addr}")]
    OutOfFileDescriptors {
        addr: SocketAddr,
        #[source]
        source: io::Error,
    },
    #[error("{addr} sent no response head within proxy-read-timeout")]
    ReadTimeout { addr: SocketAddr },
    #[error("request to {addr} failed")]
    Upstream {
        addr: SocketAddr,
        #[source]
        source: ClientError,
    },
}

impl ProxyError {
    /// The status the client gets. The only mapping from errors to statuses in the proxy.
    pub(crate) fn status(&self) -> StatusCode {
        match self {
            ProxyError::NotReady
            | ProxyError::NoEndpoints
            | ProxyError::OutOfFileDescriptors { .. } => StatusCode::SERVICE_UNAVAILABLE,
            ProxyError::NoRoute => StatusCode::NOT_FOUND,
            ProxyError::BodyTooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
            ProxyError::ConnectTimeout { .. } | ProxyError::ReadTimeout { .. } => {
                StatusCode::GATEWAY_TIMEOUT
            }
            ProxyError::Connect { .. } | ProxyError::Upstream { .. } => StatusCode::BAD_GATEWAY,
        }
    }

    /// A short plain-text answer. Static text: an error storm should not cost allocations.
    pub(crate) fn response(&self) -> Response<ResponseBody> {
        let status = self.status();
        let text: &'static str = match self {
            ProxyError::NotReady => "503 Service Unavailable: not configured yet\n",
            ProxyError::NoRoute => "404 Not Found: no route for this host and path\n",
            ProxyError::NoEndpoints => "503 Service Unavailable: no endpoints for this service\n",
            ProxyError::OutOfFileDescriptors { .. } => {
                "503 Service Unavailable: the proxy is out of file descriptors\n"
            }
            ProxyError::BodyTooLarge { .. } => "413 Payload Too Large\n",
            ProxyError::ConnectTimeout { .. } | ProxyError::ReadTimeout { .. } => {
                "504 Gateway Timeout: upstream did not answer in time\n"
            }
            ProxyError::Connect { .. } | ProxyError::Upstream { .. } => {
                "502 Bad Gateway: upstream failed\n"
            }
        };
        text_response(status, Bytes::from_static(text.as_bytes()))
    }
}

/// A `text/plain` response the proxy writes itself.
pub(crate) fn text_response(status: StatusCode, text: Bytes) -> Response<ResponseBody> {
    let mut response = Response::new(ResponseBody::full(text));
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}

/// Formats an error with its sources, `a: b: c`, for logs.
pub(crate) struct Chain<'a>(pub(crate) &'a (dyn std::error::Error + 'static));

impl std::fmt::Display for Chain<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.0)?;
        let mut source = self.0.source();
        while let Some(error) = source {
            write!(f, ": {error}")?;
            source = error.source();
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_follow_the_design() {
        let addr: SocketAddr = "127.0.0.1:1".parse().unwrap();
        let cases = [
            (ProxyError::NotReady, 503),
            (ProxyError::NoRoute, 404),
            (ProxyError::NoEndpoints, 503),
            (ProxyError::BodyTooLarge { limit: 1 }, 413),
            (ProxyError::ConnectTimeout { addr }, 504),
            (ProxyError::ReadTimeout { addr }, 504),
            (
                ProxyError::OutOfFileDescriptors {
                    addr,
                    source: io::Error::from_raw_os_error(24),
                },
                503,
            ),
            (
                ProxyError::Connect {
                    addr,
                    source: io::ErrorKind::ConnectionRefused.into(),
                },
                502,
            ),
        ];
        for (error, status) in cases {
            assert_eq!(error.status().as_u16(), status, "{error}");
            assert_eq!(error.response().status().as_u16(), status);
        }
    }

    #[test]
    fn chains_show_the_cause() {
        let error = ProxyError::Connect {
            addr: "127.0.0.1:1".parse().unwrap(),
            source: io::Error::new(io::ErrorKind::ConnectionRefused, "refused"),
        };
        assert_eq!(
            Chain(&error).to_string(),
            "connecting to 127.0.0.1:1 failed: refused"
        );
    }
}
