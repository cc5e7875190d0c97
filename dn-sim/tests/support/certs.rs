//! Certificates made at test time (rcgen): a CA, a server certificate it signed for
//! `localhost` and 127.0.0.1, a client certificate it signed, and a second CA that signed
//! nothing the server uses (the "wrong CA"). PEM files in a temporary directory.

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose,
};
use std::path::PathBuf;

pub struct TestPki {
    _dir: tempfile::TempDir,
    /// The CA bundle that signed the server and client certificates.
    pub ca: PathBuf,
    /// Another CA: trusting only it must fail.
    pub other_ca: PathBuf,
    pub server_cert: PathBuf,
    pub server_key: PathBuf,
    pub client_cert: PathBuf,
    pub client_key: PathBuf,
    /// A client certificate signed by `other_ca` (not trusted by a server that trusts `ca`).
    pub stranger_cert: PathBuf,
    pub stranger_key: PathBuf,
}

fn ca(name: &str) -> CertifiedIssuer<'static, KeyPair> {
    let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.distinguished_name.push(DnType::CommonName, name);
    params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    CertifiedIssuer::self_signed(params, KeyPair::generate().unwrap()).unwrap()
}

fn leaf(
    issuer: &CertifiedIssuer<'static, KeyPair>,
    names: &[&str],
    usage: ExtendedKeyUsagePurpose,
) -> (String, String) {
    let mut params =
        CertificateParams::new(names.iter().map(|n| n.to_string()).collect::<Vec<_>>()).unwrap();
    params.distinguished_name.push(
        DnType::CommonName,
        names.first().copied().unwrap_or("client"),
    );
    params.extended_key_usages = vec![usage];
    let key = KeyPair::generate().unwrap();
    let cert = params.signed_by(&key, issuer).unwrap();
    (cert.pem(), key.serialize_pem())
}

impl TestPki {
    pub fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let write = |name: &str, text: &str| {
            let path = dir.path().join(name);
            std::fs::write(&path, text).unwrap();
            path
        };
        let ca = ca("dn-sim test CA");
        let other = ca_other();
        let (server_cert, server_key) = leaf(
            &ca,
            &["localhost", "127.0.0.1"],
            ExtendedKeyUsagePurpose::ServerAuth,
        );
        let (client_cert, client_key) = leaf(
            &ca,
            &["loadgen-client"],
            ExtendedKeyUsagePurpose::ClientAuth,
        );
        let (stranger_cert, stranger_key) =
            leaf(&other, &["stranger"], ExtendedKeyUsagePurpose::ClientAuth);
        Self {
            ca: write("ca.pem", &ca.pem()),
            other_ca: write("other-ca.pem", &other.pem()),
            server_cert: write("server.pem", &server_cert),
            server_key: write("server.key", &server_key),
            client_cert: write("client.pem", &client_cert),
            client_key: write("client.key", &client_key),
            stranger_cert: write("stranger.pem", &stranger_cert),
            stranger_key: write("stranger.key", &stranger_key),
            _dir: dir,
        }
    }
}

fn ca_other() -> CertifiedIssuer<'static, KeyPair> {
    ca("some other CA")
}

/// A path as a command-line argument.
pub fn arg(path: &std::path::Path) -> &str {
    path.to_str().expect("a UTF-8 temporary path")
}
