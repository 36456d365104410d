/**
 * Batches the fake and the real ipvsadm must treat alike (checked against the real one in tests/vm).
 * @module
 */

/** A batch exercising every operation; tests/vm/guest checks the real ipvsadm agrees. */
export const BATCH = [
  "-A -t 10.0.0.1:80 -s rr",
  "-a -t 10.0.0.1:80 -r 10.1.0.1:8080 -m -w 1",
  "-a -t 10.0.0.1:80 -r 10.1.0.2:8080 -m -w 1",
  "-A -u 10.0.0.2:53 -s sh -p 300 -b flag-1,flag-2",
  "-a -u 10.0.0.2:53 -r 10.1.0.2:53 -m -w 1",
  "-A --sctp-service 10.0.0.3:99 -s wlc",
  "-A -t [fd00::1]:80 -s mh -b flag-1",
  "-a -t [fd00::1]:80 -r [fd00:1::5]:8080 -m -w 1",
  "-E -t 10.0.0.1:80 -s wrr -p 10800",
  "-e -t 10.0.0.1:80 -r 10.1.0.1:8080 -m -w 0",
  "-d -t 10.0.0.1:80 -r 10.1.0.2:8080",
  "-D --sctp-service 10.0.0.3:99",
];

/** What ipvsadm -S -n prints after {@linkcode BATCH} (lines sorted: the kernel's order is its hash order). */
export const BATCH_SAVED = [
  "-A -t 10.0.0.1:80 -s wrr -p 10800",
  "-A -t [fd00::1]:80 -s mh -b mh-fallback",
  "-A -u 10.0.0.2:53 -s sh -p 300 -b sh-fallback,sh-port",
  "-a -t 10.0.0.1:80 -r 10.1.0.1:8080 -m -w 0",
  "-a -t [fd00::1]:80 -r [fd00:1::5]:8080 -m -w 1",
  "-a -u 10.0.0.2:53 -r 10.1.0.2:53 -m -w 1",
];

/**
 * Lines that fail after `-A -t 10.0.0.9:80 -s rr` and `-A -t 10.0.0.10:80 -s rr`, each with the
 * message ipvsadm 1.31 prints (Linux 6.1, tests/vm).
 */
export const FAILING_LINES: ReadonlyArray<readonly [string, string]> = [
  ["-D -t 10.0.0.99:80", "No such service"],
  ["-E -t 10.0.0.99:80 -s rr", "No such service"],
  ["-d -t 10.0.0.99:80 -r 1.2.3.4:80", "Service not defined"],
  ["-a -t 10.0.0.99:80 -r 1.2.3.4:80 -m -w 1", "Service not defined"],
  ["-d -t 10.0.0.9:80 -r 1.2.3.5:80", "No such destination"],
  ["-e -t 10.0.0.9:80 -r 1.2.3.5:80 -m -w 1", "No such destination"],
  ["-A -t 10.0.0.10:80 -s bogus", "Service already exists"],
  ["-A -t 10.0.0.11:80 -s bogus", "Scheduler or persistence engine not found"],
];

/** An ipset batch using every set type and command the ipvs mode uses. */
export const IPSET_BATCH = [
  "create KUBE-CLUSTER-IP hash:ip,port family inet hashsize 1024 maxelem 65536",
  "create KUBE-LOOP-BACK hash:ip,port,ip family inet hashsize 1024 maxelem 65536",
  "create KUBE-LOAD-BALANCER-SOURCE-CIDR hash:ip,port,net family inet hashsize 1024 maxelem 65536",
  "create KUBE-NODE-PORT-TCP bitmap:port range 0-65535",
  "create KUBE-6-CLUSTER-IP hash:ip,port family inet6 hashsize 1024 maxelem 65536",
  "create KUBE-IPVS-IPS hash:ip family inet hashsize 1024 maxelem 65536",
  "add KUBE-CLUSTER-IP 10.0.0.1,tcp:80",
  "add KUBE-CLUSTER-IP 10.0.0.2,udp:53",
  "add KUBE-CLUSTER-IP 10.0.0.3,sctp:99",
  "add KUBE-LOOP-BACK 10.1.0.1,tcp:8080,10.1.0.1",
  "add KUBE-LOAD-BALANCER-SOURCE-CIDR 10.0.0.1,tcp:80,192.168.0.0/24",
  // A single address: ipset prints it without /32, as the ipvs mode writes it.
  "add KUBE-LOAD-BALANCER-SOURCE-CIDR 10.0.0.1,tcp:80,192.168.1.5",
  "add KUBE-NODE-PORT-TCP 30080",
  "add KUBE-6-CLUSTER-IP fd00::1,tcp:80",
  "add KUBE-IPVS-IPS 10.0.0.1",
  "add KUBE-CLUSTER-IP 10.0.0.1,tcp:80",
  "del KUBE-CLUSTER-IP 10.0.0.2,udp:53",
  "del KUBE-CLUSTER-IP 10.9.9.9,tcp:1",
  "create KUBE-TMP hash:ip family inet hashsize 1024 maxelem 65536",
  "add KUBE-TMP 10.0.0.9",
  "swap KUBE-IPVS-IPS KUBE-TMP",
  "destroy KUBE-TMP",
  "destroy KUBE-NOT-THERE",
];

/** ipset batches that fail, checked for the same message and the same leftover state. */
export const IPSET_FAILING: ReadonlyArray<readonly string[]> = [
  ["add KUBE-MISSING 10.0.0.1"],
  [
    "add KUBE-IPVS-IPS 10.0.0.5",
    "add KUBE-IPVS-IPS 10.0.0.6",
    "add KUBE-MISSING 1.1.1.1",
    "add KUBE-IPVS-IPS 10.0.0.7",
  ],
  [
    "create KUBE-C hash:ip family inet hashsize 1024 maxelem 65536",
    "add KUBE-C 10.0.0.7",
    "create KUBE-C hash:ip,port family inet hashsize 1024 maxelem 65536",
  ],
  ["flush KUBE-MISSING"],
  ["swap KUBE-IPVS-IPS KUBE-MISSING"],
];
