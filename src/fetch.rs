//! Archive downloads: hashed on the way and either streamed to disk or
//! unpacked as they arrive (see `package::extract::unpack_stream`), so
//! memory stays flat whatever the package size, the `zh:` hash costs no
//! second read, and an archive that is only to be unpacked is never written
//! and read back. Hashing, writing and unpacking run on a thread of their
//! own (a large file's hashing and writing on a second one while a core is
//! idle), beside the network side (TLS, HTTP/2) and behind it in priority,
//! so a download is as fast as the slower of the two rather than their sum.
//! Unlike Terraform, downloads are retried with backoff, resumed with `Range`
//! where the server allows it, and abandoned when the server stalls or only
//! trickles.

use std::collections::VecDeque;
use std::io::{IoSlice, Seek, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures_util::StreamExt;
use reqwest::StatusCode;
use reqwest::header::{ACCEPT_RANGES, CONTENT_RANGE, CONTENT_TYPE, RANGE};
use sha2::{Digest, Sha256};
use url::Url;

use crate::cliconfig::netrc::Netrc;
use crate::package::extract::{
    ArchiveHash, Chunks, Declined, ExtractLimits, ExtractedFile, hash_stream, unpack_stream,
};
use crate::sha256::QueuedLane;

#[derive(Clone, Debug)]
pub struct DownloadSettings {
    /// Attempts after the first one.
    pub retries: u32,
    /// Give up when no byte arrives for this long.
    pub stall_timeout: Duration,
    /// Delay before the first retry; doubled each time, capped at 30 s.
    pub backoff: Duration,
    /// Largest archive accepted. The package size limit serves here too: an
    /// archive is never much larger than what it unpacks to, and without a
    /// cap an endless body would fill the disk before any check ran.
    pub max_bytes: u64,
}

impl Default for DownloadSettings {
    fn default() -> Self {
        DownloadSettings {
            retries: 3,
            stall_timeout: Duration::from_secs(30),
            backoff: Duration::from_secs(1),
            max_bytes: ExtractLimits::default().max_total_bytes,
        }
    }
}

impl DownloadSettings {
    /// The defaults, overridden by the same environment variables `init`'s
    /// flags read, for the commands that have no such flags. Values that do
    /// not parse are ignored.
    pub fn from_env() -> Self {
        let var = |name: &str| std::env::var(name).ok();
        let defaults = DownloadSettings::default();
        DownloadSettings {
            retries: var("TFINSTALL_DOWNLOAD_RETRIES")
                .and_then(|v| crate::units::parse_count(&v).ok())
                .unwrap_or(defaults.retries),
            stall_timeout: var("TFINSTALL_DOWNLOAD_STALL_TIMEOUT")
                .and_then(|v| crate::units::parse_duration(&v).ok())
                .unwrap_or(defaults.stall_timeout),
            backoff: var("TFINSTALL_DOWNLOAD_RETRY_DELAY")
                .and_then(|v| crate::units::parse_duration(&v).ok())
                .unwrap_or(defaults.backoff),
            max_bytes: var("TFINSTALL_MAX_PACKAGE_SIZE")
                .and_then(|v| crate::units::parse_size(&v).ok())
                .unwrap_or(defaults.max_bytes),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum DownloadError {
    #[error("{host}: bad response code: {status}")]
    Status {
        host: String,
        status: u16,
        /// How long the server asked to be left alone (`Retry-After`).
        retry_after: Option<Duration>,
    },
    #[error(
        "{host}: the server sent {what} instead of a provider package (a zip archive); it may be an error page from a proxy or a misconfigured mirror"
    )]
    NotAnArchive { host: String, what: String },
    #[error(
        "{host}: no data received for {}; the server stalled (if it is just slow, raise the limit with -download-stall-timeout or TFINSTALL_DOWNLOAD_STALL_TIMEOUT)", crate::units::format_duration(*.timeout)
    )]
    Stalled { host: String, timeout: Duration },
    #[error(
        "{host}: only {received} bytes arrived in {}, less than {} bytes a second; the server is trickling data and the download would not finish (if the link is really this slow, fetch the package another way and install it from a mirror with -plugin-dir)", crate::units::format_duration(*.window), MIN_BYTES_PER_SECOND
    )]
    Trickling {
        host: String,
        received: u64,
        window: Duration,
    },
    #[error("{host}: {message}")]
    Transport { host: String, message: String },
    #[error(
        "{host}: the archive is larger than {limit} bytes, the limit for one provider package (if the package is genuine, raise the limit with -max-package-size)"
    )]
    TooLarge { host: String, limit: u64 },
    #[error("failed to write the downloaded package: {0}")]
    Io(#[from] std::io::Error),
    /// An OCI registry refused the blob or its credentials.
    #[error("{host}: {message}")]
    Refused { host: String, message: String },
    /// A content-addressed package (an OCI blob) that is not the content
    /// its address names: corrupted storage or a tampering registry.
    #[error(
        "{host}: provider package does not match digest {expected} (its content has digest {actual}); the registry's copy is damaged or was tampered with, so nothing was installed"
    )]
    DigestMismatch {
        host: String,
        expected: String,
        actual: String,
    },
    /// The last of several failed attempts; the count tells the user the
    /// failure is not a blip that trying again at once would fix.
    #[error("{last} (gave up after {attempts} attempts)")]
    Exhausted {
        attempts: u32,
        last: Box<DownloadError>,
    },
}

impl DownloadError {
    /// How long the server asked to be left alone, if it did.
    fn retry_after(&self) -> Option<Duration> {
        match self {
            DownloadError::Status { retry_after, .. } => *retry_after,
            _ => None,
        }
    }

    fn is_retryable(&self) -> bool {
        match self {
            DownloadError::Status { status, .. } => {
                *status == 429 || (*status >= 500 && *status != 501)
            }
            DownloadError::Stalled { .. }
            | DownloadError::Trickling { .. }
            | DownloadError::Transport { .. } => true,
            DownloadError::NotAnArchive { .. }
            | DownloadError::Refused { .. }
            | DownloadError::DigestMismatch { .. }
            | DownloadError::TooLarge { .. }
            | DownloadError::Io(_)
            | DownloadError::Exhausted { .. } => false,
        }
    }
}

/// How far one download has got: bytes of the package on disk so far and,
/// when the server said, the package's full size.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DownloadProgress {
    pub received: u64,
    pub total: Option<u64>,
}

pub struct Downloader {
    client: reqwest::Client,
    settings: DownloadSettings,
    /// Basic credentials for package URLs, as Terraform 1.11 sends them.
    netrc: Option<Arc<Netrc>>,
}

/// Network chunks (16 KiB on HTTP/2) go to the writer in batches of about
/// this size, one hand-over and one vectored write each: a 200 MB package
/// is some 800 wake-ups and system calls instead of 13,000.
const BATCH_BYTES: usize = 256 * 1024;

/// Batches received but not yet hashed and written, at most: bounds the
/// memory a fast network and a slow disk take.
const SINK_QUEUE_BATCHES: usize = 2;

/// Progress through one download, kept across attempts so a retry can resume.
struct Partial {
    sink: Sink,
    written: u64,
    resumable: bool,
}

enum SinkOp {
    Data(Vec<Bytes>),
    /// Start the file and the hash over.
    Restart,
}

/// Where a download goes as its bytes arrive.
#[derive(Clone, Copy, Debug)]
pub enum Destination<'a> {
    /// A new file, for a caller that keeps the archive or reads it again.
    File(&'a Path),
    /// Straight into a package directory; the archive is never stored.
    Unpacked(&'a UnpackInto),
    /// Nowhere: the package's files are checked and hashed as the bytes
    /// arrive, as [`Destination::Unpacked`] would unpack them, and nothing
    /// is stored (the `h1:` of another platform's package, for the lock
    /// file).
    Hashed {
        provider_type: &'a str,
        limits: &'a ExtractLimits,
    },
}

/// A package directory to unpack a download into.
#[derive(Clone, Debug)]
pub struct UnpackInto {
    /// Created by the download; the caller removes it after a failure or a
    /// decline, and publishes it only once the archive's hash is verified.
    pub dir: PathBuf,
    pub provider_type: String,
    pub limits: ExtractLimits,
}

/// What a finished download produced.
#[derive(Debug)]
pub struct Downloaded {
    /// The archive's SHA-256.
    pub sha256: [u8; 32],
    /// The archive's length in bytes.
    pub size: u64,
    /// For [`Destination::Unpacked`] and [`Destination::Hashed`], the
    /// package's files, or why the full extractor must judge the archive
    /// instead (the caller then downloads it again to a file).
    pub unpacked: Option<Result<Vec<ExtractedFile>, Declined>>,
}

/// The archive's destination and its SHA-256, fed from the network side
/// through a bounded queue and owned by a thread of its own ([`spawn_writer`]).
struct Sink {
    queue: Option<tokio::sync::mpsc::Sender<SinkOp>>,
    /// Taken by the first [`finish`](Self::finish).
    writer: Option<tokio::sync::oneshot::Receiver<std::io::Result<SinkOutput>>>,
    /// Joined when the sink is dropped.
    thread: Option<std::thread::JoinHandle<()>>,
}

/// A download abandoned half-way (its future dropped, as when a registry's
/// checksum documents fail first) waits here for its thread: the caller
/// removes the staging directory next, and an unpacking thread still
/// running would write into it, or create it again. With the queue closed
/// the thread stops after the piece it is on.
impl Drop for Sink {
    fn drop(&mut self) {
        self.queue = None;
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

struct SinkOutput {
    sha256: [u8; 32],
    unpacked: Option<Result<Vec<ExtractedFile>, Declined>>,
}

impl Sink {
    fn new(destination: Destination<'_>) -> std::io::Result<Sink> {
        let (queue, ops) = tokio::sync::mpsc::channel(SINK_QUEUE_BATCHES);
        let (thread, writer) = match destination {
            Destination::File(path) => {
                let file = std::fs::File::create_new(path)?;
                spawn_writer(move || write_file(file, ops))?
            }
            Destination::Unpacked(into) => {
                let into = into.clone();
                spawn_writer(move || {
                    unpack(Some(&into.dir), &into.provider_type, &into.limits, ops)
                })?
            }
            Destination::Hashed {
                provider_type,
                limits,
            } => {
                let (provider_type, limits) = (provider_type.to_owned(), limits.clone());
                spawn_writer(move || unpack(None, &provider_type, &limits, ops))?
            }
        };
        Ok(Sink {
            queue: Some(queue),
            writer: Some(writer),
            thread: Some(thread),
        })
    }

    async fn send(&mut self, op: SinkOp) -> Result<(), DownloadError> {
        let sent = match &self.queue {
            Some(queue) => queue.send(op).await.is_ok(),
            None => false,
        };
        if sent {
            return Ok(());
        }
        // The writer stopped early, which only a write error makes it do.
        self.finish().await?;
        Err(DownloadError::Io(std::io::Error::other(
            "the archive writer stopped",
        )))
    }

    /// Waits for everything queued to be written or unpacked.
    async fn finish(&mut self) -> Result<SinkOutput, DownloadError> {
        self.queue = None;
        match self.writer.take() {
            Some(writer) => match writer.await {
                Ok(result) => Ok(result?),
                Err(_) => Err(DownloadError::Io(std::io::Error::other(
                    "the archive writer ended without a result",
                ))),
            },
            None => Err(DownloadError::Io(std::io::Error::other(
                "the archive writer stopped",
            ))),
        }
    }
}

/// Runs a download's hashing and writing or unpacking on a thread of its
/// own at a lower scheduling priority than the network side. Ten downloads
/// make ten such threads, and at equal priority the one thread that reads
/// the sockets, decrypts and acknowledges gets a tenth of the processors'
/// time: the receive windows fill, the sender pauses, the writers drain
/// their queues and wait, and both cores idle for part of every second.
/// Behind the network thread, the writers take only the time it leaves and
/// the pipe stays full (on the benchmark the idle share fell from about a
/// tenth to nothing). A thread of its own rather than one from the blocking
/// pool, because a thread cannot be given its priority back and pool
/// threads go on to other work. The thread that may hash and write a large
/// file beside it (`package::extract`) starts from this one and so takes
/// its priority.
/// The thread, and its result for an async caller to await.
fn spawn_writer<T: Send + 'static>(
    work: impl FnOnce() -> T + Send + 'static,
) -> std::io::Result<(
    std::thread::JoinHandle<()>,
    tokio::sync::oneshot::Receiver<T>,
)> {
    let (result, received) = tokio::sync::oneshot::channel();
    let thread = std::thread::Builder::new()
        .name("download-sink".into())
        .spawn(move || {
            lower_thread_priority();
            let _ = result.send(work());
        })?;
    Ok((thread, received))
}

/// Ten steps nicer than the process: the writers' share of a busy processor
/// is about a tenth of the network thread's, and all of it when the network
/// thread waits.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn lower_thread_priority() {
    // SAFETY: gettid has no preconditions; getpriority and setpriority on the
    // calling thread's own id read and change only that thread's nice value
    // (Linux keeps one per thread). A failure leaves the priority as it was,
    // which is harmless.
    unsafe {
        let thread = libc::gettid() as libc::id_t;
        let nice = libc::getpriority(libc::PRIO_PROCESS, thread);
        libc::setpriority(libc::PRIO_PROCESS, thread, (nice + 10).min(19));
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn lower_thread_priority() {}

/// Not synced to disk: the archive is unpacked from the page cache or
/// published by a rename that a crash leaves undone, and a crash throws the
/// staging area away.
fn write_file(
    mut file: std::fs::File,
    mut ops: tokio::sync::mpsc::Receiver<SinkOp>,
) -> std::io::Result<SinkOutput> {
    let mut hasher = Sha256::new();
    while let Some(op) = ops.blocking_recv() {
        match op {
            SinkOp::Data(chunks) => {
                chunks.iter().for_each(|chunk| hasher.update(chunk));
                write_all_vectored(&mut file, &chunks)?;
            }
            SinkOp::Restart => {
                file.set_len(0)?;
                file.rewind()?;
                hasher = Sha256::new();
            }
        }
    }
    Ok(SinkOutput {
        sha256: hasher.finalize().into(),
        unpacked: None,
    })
}

/// Unpacks the bytes as they come into `dir`, or only hashes the files
/// without one. The hash covers every byte received, also past the point
/// where the unpacker declined, so the caller can still judge the archive
/// by its checksum first, as it would a file.
fn unpack(
    dir: Option<&Path>,
    provider_type: &str,
    limits: &ExtractLimits,
    ops: tokio::sync::mpsc::Receiver<SinkOp>,
) -> std::io::Result<SinkOutput> {
    let mut feed = Feed {
        ops,
        hash: Arc::new(Mutex::new(QueuedLane::new(MAX_UNHASHED_BYTES))),
        chunks: VecDeque::new(),
        restarted: false,
        ended: false,
    };
    loop {
        // Not `create_dir_all`: a staging area already removed must not be
        // made again.
        if let Some(dir) = dir {
            match std::fs::create_dir(dir) {
                Err(err) if err.kind() != std::io::ErrorKind::AlreadyExists => return Err(err),
                _ => {}
            }
        }
        let unpacked = match dir {
            Some(dir) => unpack_stream(&mut feed, dir, provider_type, limits),
            None => hash_stream(&mut feed, provider_type, limits),
        };
        while feed.receive() {
            feed.chunks.clear();
        }
        // Every thread that hashed beside the archive has ended with the
        // unpacker: the hash is this thread's alone again.
        let hash = std::mem::replace(
            &mut *feed.hash.lock().unwrap_or_else(|e| e.into_inner()),
            QueuedLane::new(MAX_UNHASHED_BYTES),
        );
        if !feed.restarted {
            return Ok(SinkOutput {
                sha256: hash.finalize(),
                unpacked: Some(unpacked),
            });
        }
        if let Some(dir) = dir {
            std::fs::remove_dir_all(dir)?;
        }
        feed.restarted = false;
    }
}

/// Received bytes not yet hashed, at most: past this they are hashed on
/// their own. Four batches: more than the queue and the batch being
/// unpacked hold, so in an ordinary download every byte is paired.
const MAX_UNHASHED_BYTES: usize = 4 * BATCH_BYTES;

/// The received bytes. Their hash is advanced beside the hash of each file
/// the unpacker writes, two lanes at once ([`Chunks::archive_hash`]), and
/// on its own for whatever is not paired (headers, the central directory,
/// an unpacker that declined).
struct Feed {
    ops: tokio::sync::mpsc::Receiver<SinkOp>,
    hash: ArchiveHash,
    chunks: VecDeque<Bytes>,
    /// The download started over from its first byte: what was read so far
    /// is void.
    restarted: bool,
    ended: bool,
}

impl Feed {
    /// Takes the next batch; false once the download has ended or started
    /// over.
    fn receive(&mut self) -> bool {
        if self.restarted || self.ended {
            return false;
        }
        match self.ops.blocking_recv() {
            Some(SinkOp::Data(chunks)) => {
                let mut hash = self.hash.lock().unwrap_or_else(|e| e.into_inner());
                chunks.iter().for_each(|chunk| hash.push(chunk.clone()));
                self.chunks.extend(chunks);
                true
            }
            Some(SinkOp::Restart) => {
                self.restarted = true;
                self.chunks.clear();
                false
            }
            None => {
                self.ended = true;
                false
            }
        }
    }
}

impl Chunks for Feed {
    fn archive_hash(&self) -> Option<ArchiveHash> {
        Some(self.hash.clone())
    }

    fn next_chunk(&mut self) -> std::io::Result<Option<Bytes>> {
        loop {
            if let Some(chunk) = self.chunks.pop_front() {
                return Ok(Some(chunk));
            }
            if !self.receive() {
                return if self.restarted {
                    Err(std::io::Error::other("the download started over"))
                } else {
                    Ok(None)
                };
            }
        }
    }
}

impl Downloader {
    pub fn new(client: reqwest::Client, settings: DownloadSettings) -> Self {
        Downloader {
            client,
            settings,
            netrc: None,
        }
    }

    /// Sends `.netrc` credentials with package downloads from the hosts
    /// the file names.
    pub fn with_netrc(mut self, netrc: Option<Arc<Netrc>>) -> Self {
        self.netrc = netrc;
        self
    }

    /// Downloads `url` to `dest`, reporting the bytes received after every
    /// chunk so a caller can show progress; a retry that has to start over
    /// reports from zero again. No Terraform credentials (tokens) are ever
    /// sent with an archive request; `.netrc` credentials for its host are.
    pub async fn download_with_progress(
        &self,
        url: &Url,
        dest: Destination<'_>,
        progress: &(dyn Fn(DownloadProgress) + Sync),
    ) -> Result<Downloaded, DownloadError> {
        let netrc = self.netrc.as_ref().and_then(|n| n.authorization_for(url));
        self.download_authorized(url, netrc.as_deref(), dest, progress)
            .await
    }

    /// [`download_with_progress`](Self::download_with_progress) with an
    /// `Authorization` header for the first request; reqwest drops it if
    /// the server redirects to another host.
    pub async fn download_authorized(
        &self,
        url: &Url,
        authorization: Option<&str>,
        dest: Destination<'_>,
        progress: &(dyn Fn(DownloadProgress) + Sync),
    ) -> Result<Downloaded, DownloadError> {
        let mut partial = Partial {
            sink: Sink::new(dest)?,
            written: 0,
            resumable: false,
        };
        let fetched = self
            .attempts(url, authorization, &mut partial, progress)
            .await;
        // Also after a failure: the caller removes what the sink wrote, so
        // the sink must have stopped writing first.
        let output = partial.sink.finish().await;
        fetched?;
        let output = output?;
        Ok(Downloaded {
            sha256: output.sha256,
            size: partial.written,
            unpacked: output.unpacked,
        })
    }

    async fn attempts(
        &self,
        url: &Url,
        authorization: Option<&str>,
        partial: &mut Partial,
        progress: &(dyn Fn(DownloadProgress) + Sync),
    ) -> Result<(), DownloadError> {
        let host = url.host_str().unwrap_or_default().to_string();
        let mut delay = self.settings.backoff;
        let mut attempt = 0;
        loop {
            match self
                .attempt(url, authorization, &host, partial, progress)
                .await
            {
                Ok(()) => return Ok(()),
                Err(err) if err.is_retryable() && attempt < self.settings.retries => {
                    attempt += 1;
                    tracing::debug!("retrying {url} after: {err}");
                    tokio::time::sleep(err.retry_after().unwrap_or(delay)).await;
                    delay = (delay * 2).min(Duration::from_secs(30));
                    if !partial.resumable {
                        partial.restart().await?;
                    }
                }
                Err(err) if attempt > 0 && err.is_retryable() => {
                    return Err(DownloadError::Exhausted {
                        attempts: attempt + 1,
                        last: Box::new(err),
                    });
                }
                Err(err) => return Err(err),
            }
        }
    }

    async fn attempt(
        &self,
        url: &Url,
        authorization: Option<&str>,
        host: &str,
        partial: &mut Partial,
        progress: &(dyn Fn(DownloadProgress) + Sync),
    ) -> Result<(), DownloadError> {
        let mut request = self.client.get(url.clone());
        if let Some(authorization) = authorization {
            request = request.header(reqwest::header::AUTHORIZATION, authorization);
        }
        if partial.written > 0 {
            request = request.header(RANGE, format!("bytes={}-", partial.written));
        }
        let transport = |err: reqwest::Error| DownloadError::Transport {
            host: host.to_string(),
            message: crate::http::error_chain(&err),
        };
        crate::http::traffic::request(url);
        crate::http::start_loading_roots();
        let response = self.with_stall_timeout(host, request.send()).await?;
        let response = response.map_err(transport)?;
        let status = response.status();
        if partial.written > 0 && status == StatusCode::OK {
            // The server ignored the range: start over from the first byte.
            partial.restart().await?;
        } else if partial.written > 0 && status == StatusCode::PARTIAL_CONTENT {
            let expected = format!("bytes {}-", partial.written);
            let starts_right = response
                .headers()
                .get(CONTENT_RANGE)
                .and_then(|v| v.to_str().ok())
                .is_some_and(|v| v.starts_with(&expected));
            if !starts_right {
                partial.restart().await?;
                return Err(DownloadError::Transport {
                    host: host.to_string(),
                    message: "the server resumed the download at the wrong offset".to_string(),
                });
            }
        } else if status != StatusCode::OK {
            return Err(DownloadError::Status {
                host: host.to_string(),
                status: status.as_u16(),
                retry_after: crate::http::retry_after(status, response.headers()),
            });
        }
        if let Some(content_type) = response
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
        {
            let media = content_type
                .split(';')
                .next()
                .unwrap_or_default()
                .trim()
                .to_ascii_lowercase();
            if media.starts_with("text/html") || media == "application/json" {
                return Err(DownloadError::NotAnArchive {
                    host: host.to_string(),
                    what: format!("{content_type:?}"),
                });
            }
        }
        partial.resumable = response
            .headers()
            .get(ACCEPT_RANGES)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.eq_ignore_ascii_case("bytes"))
            || status == StatusCode::PARTIAL_CONTENT;
        let expected_len = response.content_length();
        let too_large = || DownloadError::TooLarge {
            host: host.to_string(),
            limit: self.settings.max_bytes,
        };
        if expected_len
            .is_some_and(|len| partial.written.saturating_add(len) > self.settings.max_bytes)
        {
            return Err(too_large());
        }
        let total = expected_len.map(|len| len + partial.written);
        progress(DownloadProgress {
            received: partial.written,
            total,
        });
        let mut body = response.bytes_stream();
        let mut received = 0u64;
        let mut pace = PaceCheck::new(self.settings.stall_timeout);
        let mut batch = Batch::default();
        let streamed: Result<(), DownloadError> = async {
            while let Some(chunk) = self.with_stall_timeout(host, body.next()).await? {
                let chunk = chunk.map_err(transport)?;
                crate::http::traffic::received(url, chunk.len());
                let before = partial.written + batch.len;
                if before.saturating_add(chunk.len() as u64) > self.settings.max_bytes {
                    return Err(too_large());
                }
                if before == 0 && looks_like_html(&chunk) {
                    return Err(DownloadError::NotAnArchive {
                        host: host.to_string(),
                        what: "an HTML page".to_string(),
                    });
                }
                received += chunk.len() as u64;
                pace.record(chunk.len() as u64)
                    .map_err(|(received, window)| DownloadError::Trickling {
                        host: host.to_string(),
                        received,
                        window,
                    })?;
                batch.push(chunk);
                if batch.len >= BATCH_BYTES as u64 {
                    partial.write(std::mem::take(&mut batch)).await?;
                }
                progress(DownloadProgress {
                    received: partial.written + batch.len,
                    total,
                });
            }
            Ok(())
        }
        .await;
        // What arrived before a failure is kept, so a retry resumes after it.
        partial.write(batch).await?;
        streamed?;
        if let Some(len) = expected_len
            && received < len
        {
            return Err(DownloadError::Transport {
                host: host.to_string(),
                message: format!("the connection closed after {received} of {len} bytes"),
            });
        }
        Ok(())
    }

    async fn with_stall_timeout<F: std::future::Future>(
        &self,
        host: &str,
        fut: F,
    ) -> Result<F::Output, DownloadError> {
        tokio::time::timeout(self.settings.stall_timeout, fut)
            .await
            .map_err(|_| DownloadError::Stalled {
                host: host.to_string(),
                timeout: self.settings.stall_timeout,
            })
    }
}

/// The slowest a download may be, averaged over a stall window. The stall
/// timeout alone lets a server that sends a byte just before each deadline
/// hold a download open forever; at this pace a small provider (5 MB)
/// would take well over an hour, so nothing useful is cut off.
const MIN_BYTES_PER_SECOND: u64 = 1024;

/// Judges a body's pace over consecutive windows as long as the stall
/// timeout, like curl's `--speed-limit`/`--speed-time`.
struct PaceCheck {
    window: Duration,
    started: Instant,
    bytes: u64,
}

impl PaceCheck {
    fn new(window: Duration) -> Self {
        PaceCheck {
            window,
            started: Instant::now(),
            bytes: 0,
        }
    }

    /// Counts `len` more bytes; at the end of each window, the bytes it saw
    /// and its length if they fell short.
    fn record(&mut self, len: u64) -> Result<(), (u64, Duration)> {
        self.bytes = self.bytes.saturating_add(len);
        let elapsed = self.started.elapsed();
        if elapsed < self.window {
            return Ok(());
        }
        let needed = MIN_BYTES_PER_SECOND as f64 * elapsed.as_secs_f64();
        if (self.bytes as f64) < needed {
            return Err((self.bytes, elapsed));
        }
        self.started = Instant::now();
        self.bytes = 0;
        Ok(())
    }
}

/// Whether a body starts like an HTML document. Error pages from proxies and
/// captive portals often come with status 200 and the content type the URL
/// suggests; a zip starts with `PK`, so this never mistakes a real package.
fn looks_like_html(start: &[u8]) -> bool {
    let text = start.trim_ascii_start();
    let prefix = &text[..text.len().min(16)];
    let lower = prefix.to_ascii_lowercase();
    lower.starts_with(b"<!doctype html") || lower.starts_with(b"<html")
}

impl Partial {
    async fn write(&mut self, batch: Batch) -> Result<(), DownloadError> {
        if batch.chunks.is_empty() {
            return Ok(());
        }
        self.sink.send(SinkOp::Data(batch.chunks)).await?;
        self.written += batch.len;
        Ok(())
    }

    async fn restart(&mut self) -> Result<(), DownloadError> {
        self.sink.send(SinkOp::Restart).await?;
        self.written = 0;
        Ok(())
    }
}

/// Received chunks not yet handed to the writer.
#[derive(Default)]
struct Batch {
    chunks: Vec<Bytes>,
    len: u64,
}

impl Batch {
    fn push(&mut self, chunk: Bytes) {
        self.len += chunk.len() as u64;
        self.chunks.push(chunk);
    }
}

/// Writes every chunk, in order, in as few system calls as the kernel allows.
fn write_all_vectored(file: &mut std::fs::File, chunks: &[Bytes]) -> std::io::Result<()> {
    let mut slices: Vec<IoSlice<'_>> = chunks.iter().map(|c| IoSlice::new(c)).collect();
    let mut rest = &mut slices[..];
    while !rest.is_empty() {
        match file.write_vectored(rest) {
            Ok(0) => return Err(std::io::ErrorKind::WriteZero.into()),
            Ok(written) => IoSlice::advance_slices(&mut rest, written),
            Err(err) if err.kind() == std::io::ErrorKind::Interrupted => {}
            Err(err) => return Err(err),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn zip_of(files: &[(&str, &[u8])], method: zip::CompressionMethod) -> Vec<u8> {
        let mut writer = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
        let options = zip::write::SimpleFileOptions::default()
            .compression_method(method)
            .unix_permissions(0o755);
        for (name, data) in files {
            writer.start_file(*name, options).unwrap();
            writer.write_all(data).unwrap();
        }
        writer.finish().unwrap().into_inner()
    }

    fn noise(len: usize, seed: u32) -> Vec<u8> {
        (0..len as u32)
            .map(|i| (i.wrapping_mul(2_654_435_761).wrapping_add(seed) >> 13) as u8)
            .collect()
    }

    /// Runs the unpacking side of a download on `ops` as it runs in a sink.
    fn unpacked(ops: Vec<SinkOp>) -> (tempfile::TempDir, SinkOutput) {
        let scratch = tempfile::tempdir().unwrap();
        let output = run_sink(Some(&scratch.path().join("package")), ops);
        (scratch, output)
    }

    /// The same for a download that is only hashed ([`Destination::Hashed`]).
    fn hashed(ops: Vec<SinkOp>) -> SinkOutput {
        run_sink(None, ops)
    }

    fn run_sink(dir: Option<&Path>, ops: Vec<SinkOp>) -> SinkOutput {
        let (queue, receiver) = tokio::sync::mpsc::channel(ops.len().max(1));
        for op in ops {
            queue.try_send(op).unwrap_or_else(|_| unreachable!());
        }
        drop(queue);
        unpack(dir, "null", &ExtractLimits::default(), receiver).unwrap()
    }

    /// The archive in batches of `batch` bytes, in chunks of `chunk`.
    fn batches(archive: &[u8], batch: usize, chunk: usize) -> Vec<SinkOp> {
        archive
            .chunks(batch)
            .map(|batch| SinkOp::Data(batch.chunks(chunk).map(Bytes::copy_from_slice).collect()))
            .collect()
    }

    /// The archive's hash is advanced beside each file's, so both must come
    /// out exactly as SHA-256 of what was received and of what was written,
    /// however the bytes arrive and whether the entries pair up or not.
    #[test]
    fn the_archive_and_its_files_hash_exactly_however_the_bytes_arrive() {
        let executable = noise(3 * BATCH_BYTES + 12_345, 1);
        let readme = b"docs\n".repeat(30_000);
        for method in [
            zip::CompressionMethod::Stored,
            zip::CompressionMethod::Deflated,
        ] {
            let archive = zip_of(
                &[
                    ("terraform-provider-null_v1.0.0", &executable),
                    ("README", &readme),
                ],
                method,
            );
            let archive_sha256: [u8; 32] = Sha256::digest(&archive).into();
            for (batch, chunk) in [
                (BATCH_BYTES, 16_384),
                (100_000, 4_099),
                (7, 3),
                (archive.len(), archive.len()),
            ] {
                let (_scratch, output) = unpacked(batches(&archive, batch, chunk));
                assert_eq!(output.sha256, archive_sha256, "{method:?} {batch}/{chunk}");
                let files = output.unpacked.unwrap().unwrap();
                let only_hashed = hashed(batches(&archive, batch, chunk));
                assert_eq!(only_hashed.sha256, archive_sha256);
                assert_eq!(only_hashed.unpacked.unwrap().unwrap(), files);
                let sha256_of =
                    |name: &str| files.iter().find(|file| file.name == name).unwrap().sha256;
                assert_eq!(
                    sha256_of("terraform-provider-null_v1.0.0"),
                    <[u8; 32]>::from(Sha256::digest(&executable)),
                    "{method:?} {batch}/{chunk}"
                );
                assert_eq!(
                    sha256_of("README"),
                    <[u8; 32]>::from(Sha256::digest(&readme)),
                    "{method:?} {batch}/{chunk}"
                );
            }
        }
    }

    #[test]
    fn bytes_received_before_a_restart_are_not_in_the_hash() {
        let archive = zip_of(
            &[("terraform-provider-null_v1.0.0", &noise(2 * BATCH_BYTES, 2))],
            zip::CompressionMethod::Stored,
        );
        let mut ops = batches(&archive[..BATCH_BYTES + 10], 50_000, 16_384);
        ops.push(SinkOp::Restart);
        ops.extend(batches(&archive, BATCH_BYTES, 16_384));
        let (scratch, output) = unpacked(ops);
        assert_eq!(output.sha256, <[u8; 32]>::from(Sha256::digest(&archive)));
        let files = output.unpacked.unwrap().unwrap();
        // The files of the download that started over, and nothing else.
        let listed: Vec<String> = std::fs::read_dir(scratch.path().join("package"))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(listed, ["terraform-provider-null_v1.0.0"]);
        assert_eq!(files.len(), 1);
    }

    #[test]
    fn a_hashed_download_that_starts_over_hashes_only_the_second_attempt() {
        let executable = noise(2 * BATCH_BYTES, 2);
        let archive = zip_of(
            &[("terraform-provider-null_v1.0.0", &executable)],
            zip::CompressionMethod::Deflated,
        );
        let mut ops = batches(&archive[..archive.len() / 2], 5_000, 1_024);
        ops.push(SinkOp::Restart);
        ops.extend(batches(&archive, BATCH_BYTES, 16_384));
        let output = hashed(ops);
        assert_eq!(output.sha256, <[u8; 32]>::from(Sha256::digest(&archive)));
        let files = output.unpacked.unwrap().unwrap();
        assert_eq!(
            files[0].sha256,
            <[u8; 32]>::from(Sha256::digest(&executable))
        );
    }

    #[test]
    fn a_declined_archive_is_still_hashed_whole() {
        // Data before the first entry: the stream declines at once, and the
        // rest is hashed on its own.
        let mut archive = b"prefix".repeat(100_000);
        archive.extend(zip_of(
            &[("terraform-provider-null_v1.0.0", &noise(BATCH_BYTES, 3))],
            zip::CompressionMethod::Stored,
        ));
        let (_scratch, output) = unpacked(batches(&archive, BATCH_BYTES, 16_384));
        assert_eq!(output.sha256, <[u8; 32]>::from(Sha256::digest(&archive)));
        assert!(output.unpacked.unwrap().is_err());
        let output = hashed(batches(&archive, BATCH_BYTES, 16_384));
        assert_eq!(output.sha256, <[u8; 32]>::from(Sha256::digest(&archive)));
        assert!(output.unpacked.unwrap().is_err());
    }
}
