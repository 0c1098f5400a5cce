//! A CONNECT proxy, as a corporate proxy in front of a CI job: it logs the
//! target of every request it gets, then tunnels a `CONNECT HOST:PORT` to
//! `127.0.0.1:PORT` whatever `HOST` is, so names such as `registry.test`
//! reach the test servers. It dials only the loopback address, and answers
//! anything but `CONNECT` with 405 (logged too), so it is no open proxy.

use std::io::{BufRead as _, BufReader, Write as _};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};

pub struct ConnectProxy {
    port: u16,
    log: Arc<Mutex<Vec<String>>>,
}

impl ConnectProxy {
    pub fn start() -> ConnectProxy {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the proxy");
        let port = listener.local_addr().unwrap().port();
        let log = Arc::new(Mutex::new(Vec::new()));
        let accept_log = Arc::clone(&log);
        std::thread::spawn(move || {
            for client in listener.incoming().flatten() {
                let log = Arc::clone(&accept_log);
                std::thread::spawn(move || serve(client, &log));
            }
        });
        ConnectProxy { port, log }
    }

    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// `METHOD TARGET` of each request since the last call, in order.
    pub fn take_log(&self) -> Vec<String> {
        std::mem::take(&mut *self.log.lock().unwrap())
    }
}

fn serve(client: TcpStream, log: &Mutex<Vec<String>>) {
    let mut reader = BufReader::new(client.try_clone().expect("clone the client stream"));
    let mut request_line = String::new();
    if reader.read_line(&mut request_line).is_err() {
        return;
    }
    // The rest of the head, up to the empty line.
    loop {
        let mut line = String::new();
        match reader.read_line(&mut line) {
            Ok(0) | Err(_) => return,
            Ok(_) if line == "\r\n" || line == "\n" => break,
            Ok(_) => {}
        }
    }
    let mut words = request_line.split_whitespace();
    let (method, target) = (words.next().unwrap_or(""), words.next().unwrap_or(""));
    log.lock().unwrap().push(format!("{method} {target}"));
    let mut client = client;
    let port = target
        .rsplit_once(':')
        .and_then(|(_, port)| port.parse::<u16>().ok());
    let upstream = match (method, port) {
        ("CONNECT", Some(port)) => TcpStream::connect(("127.0.0.1", port)).ok(),
        _ => None,
    };
    let Some(upstream) = upstream else {
        let _ = client.write_all(b"HTTP/1.1 405 Method Not Allowed\r\nContent-Length: 0\r\n\r\n");
        return;
    };
    if client
        .write_all(b"HTTP/1.1 200 Connection established\r\n\r\n")
        .is_err()
    {
        return;
    }
    // Bytes the client sent after the head belong to the tunnel.
    let buffered = reader.buffer().to_vec();
    let mut to_upstream = upstream.try_clone().expect("clone the upstream stream");
    let mut from_upstream = upstream;
    let mut client_reader = reader.into_inner();
    let mut client_writer = client;
    let forward = std::thread::spawn(move || {
        let _ = to_upstream.write_all(&buffered);
        let _ = std::io::copy(&mut client_reader, &mut to_upstream);
        let _ = to_upstream.shutdown(std::net::Shutdown::Write);
    });
    let _ = std::io::copy(&mut from_upstream, &mut client_writer);
    let _ = client_writer.shutdown(std::net::Shutdown::Write);
    let _ = forward.join();
}
