# A throwaway certificate authority with openssl (sourced: scripts/kube-cluster.sh,
# scripts/kube-node.sh). Call in the folder that holds the files; EC P-256 keys (~0.2 s for a
# handful of certificates).

# pki_key FILE: a new private key.
pki_key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1" 2>/dev/null; }

# pki_ca: ca.key and a self-signed ca.crt, CN=$1.
pki_ca() {
  pki_key ca.key
  openssl req -x509 -new -key ca.key -subj "/CN=$1" -days 3650 -sha256 \
    -addext "keyUsage=critical,keyCertSign,cRLSign" -out ca.crt 2>/dev/null
}

# pki_sign NAME SUBJECT EXTENSIONS: NAME.key and NAME.crt for SUBJECT, signed by the CA, with
# EXTENSIONS (openssl extension lines).
pki_sign() {
  pki_key "$1.key"
  openssl req -new -key "$1.key" -subj "$2" -out "$1.csr" 2>/dev/null
  printf '%s\n' "$3" >"$1.ext"
  openssl x509 -req -in "$1.csr" -CA ca.crt -CAkey ca.key -CAcreateserial -days 3650 \
    -sha256 -extfile "$1.ext" -out "$1.crt" 2>/dev/null
  rm -f "$1.csr" "$1.ext"
}
