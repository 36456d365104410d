# Build: the compile stage needs network access to Deno's release server for denort.
FROM debian:trixie-slim AS build
RUN apt-get update && apt-get install -y --no-install-recommends nodejs npm ca-certificates && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
RUN npm install -g "deno@$(cat .deno-version)" && deno task compile

# trixie: its nft (1.1.3) programs IPv6 ClientIP affinity, on whose update rule bookworm's 1.0.6 aborts.
FROM debian:trixie-slim
RUN apt-get update && apt-get install -y --no-install-recommends \
      iptables ipset ipvsadm conntrack nftables nfacct iproute2 procps util-linux ca-certificates \
    && rm -rf /var/lib/apt/lists/*
COPY --from=build /src/kube-proxy-deno /usr/local/bin/kube-proxy-deno
# kubeadm's DaemonSet runs /usr/local/bin/kube-proxy: swapping the image is the whole migration.
RUN ln -s kube-proxy-deno /usr/local/bin/kube-proxy
ENTRYPOINT ["/usr/local/bin/kube-proxy-deno"]
