# Sourced by the scripts that run Debian's nginx as a peer or a backend (bench-proxy.sh,
# bench-idle.sh, callgrind-proxy.sh).

# nginx_http_common DIR: what their nginx configurations share at the http level: temp paths in
# DIR/tmp (Debian's compiled-in ones are under /var/lib/nginx), no version in Server, long
# keep-alive.
nginx_http_common() {
    local dir=$1
    cat <<EOF
    default_type application/octet-stream;
    server_tokens off;
    client_body_temp_path $dir/tmp/body;
    proxy_temp_path $dir/tmp/proxy;
    fastcgi_temp_path $dir/tmp/fastcgi;
    uwsgi_temp_path $dir/tmp/uwsgi;
    scgi_temp_path $dir/tmp/scgi;
    keepalive_timeout 75s;
    keepalive_requests 100000000;
EOF
}
