import { assertEquals, assertThrows } from "../tests/support/assert.ts";
import {
  addRealServer,
  addVirtualServer,
  deleteRealServer,
  deleteVirtualServer,
  editRealServer,
  editVirtualServer,
  IpvsError,
  parseConnections,
  parseSave,
  parseStats,
  type VirtualServer,
} from "./ipvsadm.ts";

const VS: VirtualServer = { address: "10.0.0.1", protocol: "tcp", port: 80, scheduler: "rr", flags: [] };

Deno.test("ipvs batch lines are what ipvsadm -R reads", () => {
  assertEquals(addVirtualServer(VS), "-A -t 10.0.0.1:80 -s rr");
  assertEquals(
    addVirtualServer({
      ...VS,
      protocol: "udp",
      scheduler: "sh",
      flags: ["flag-2", "flag-1"],
      persistentTimeout: 300,
    }),
    "-A -u 10.0.0.1:80 -s sh -p 300 -b flag-1,flag-2",
  );
  assertEquals(
    editVirtualServer({ ...VS, address: "fd00::1", protocol: "sctp" }),
    "-E --sctp-service [fd00::1]:80 -s rr",
  );
  assertEquals(deleteVirtualServer(VS), "-D -t 10.0.0.1:80");
  assertEquals(
    addRealServer(VS, { address: "10.1.0.1", port: 8080, weight: 1 }),
    "-a -t 10.0.0.1:80 -r 10.1.0.1:8080 -m -w 1",
  );
  assertEquals(
    editRealServer(VS, { address: "fd00:1::5", port: 8080, weight: 0 }),
    "-e -t 10.0.0.1:80 -r [fd00:1::5]:8080 -m -w 0",
  );
  assertEquals(
    deleteRealServer(VS, { address: "10.1.0.1", port: 8080 }),
    "-d -t 10.0.0.1:80 -r 10.1.0.1:8080",
  );
});

Deno.test("ipvs batch lines refuse anything that could inject text", () => {
  const bad: Array<() => string> = [
    () => addVirtualServer({ ...VS, address: "10.0.0.1\n-C" }),
    () => addVirtualServer({ ...VS, port: 0 }),
    () => addVirtualServer({ ...VS, scheduler: "rr -p" }),
    () => addVirtualServer({ ...VS, flags: ["flag-1 -x"] }),
    () => addVirtualServer({ ...VS, persistentTimeout: -1 }),
    () => addVirtualServer({ ...VS, protocol: "icmp" as never }),
    () => addRealServer(VS, { address: "10.1.0.1", port: 8080, weight: 1.5 }),
    () => deleteRealServer(VS, { address: "10.1.0.1 ", port: 8080 }),
  ];
  for (const f of bad) assertThrows(f, IpvsError);
});

Deno.test("parseSave reads ipvsadm -S -n as the real ipvsadm prints it (flag names, default persistence)", () => {
  // Printed by ipvsadm 1.31 on Linux 6.1 (tests/vm) for the batch in ipvs_test's first test and more.
  const text = `-A -t 10.0.0.1:80 -s rr -b flag-1,flag-3
-A -t 10.0.0.5:80 -s sh -b 
-A -t 10.0.0.6:80 -s wrr -p 360
-A -u 10.0.0.2:53 -s sh -p 300 -b sh-fallback,sh-port
-a -u 10.0.0.2:53 -r 10.1.0.2:53 -m -w 0
-A --sctp-service 10.0.0.3:99 -s wlc
-A -t [fd00::1]:80 -s mh -b mh-fallback
-a -t [fd00::1]:80 -r [fd00:1::5]:8080 -m -w 1
`;
  assertEquals(
    parseSave(text).map((
      s,
    ) => [s.vs.protocol, s.vs.address, s.vs.scheduler, s.vs.flags, s.vs.persistentTimeout, s.reals]),
    [
      ["tcp", "10.0.0.1", "rr", ["flag-1", "flag-3"], undefined, []],
      ["tcp", "10.0.0.5", "sh", ["flag-3"], undefined, []],
      ["tcp", "10.0.0.6", "wrr", [], 360, []],
      ["udp", "10.0.0.2", "sh", ["flag-1", "flag-2"], 300, [{ address: "10.1.0.2", port: 53, weight: 0 }]],
      ["sctp", "10.0.0.3", "wlc", [], undefined, []],
      ["tcp", "fd00::1", "mh", ["flag-1"], undefined, [{ address: "fd00:1::5", port: 8080, weight: 1 }]],
    ],
  );
});

Deno.test("parseConnections and parseStats read ipvsadm's listings", () => {
  const list = `IP Virtual Server version 1.2.1 (size=4096)
Prot LocalAddress:Port Scheduler Flags
  -> RemoteAddress:Port           Forward Weight ActiveConn InActConn
TCP  10.0.0.1:80 rr
  -> 10.1.0.1:8080                Masq    1      3          7         
UDP  10.0.0.2:53 sh (sh-fallback,sh-port) persistent 300
  -> 10.1.0.2:53                  Masq    0      0          2         
TCP  [fd00::1]:80 mh (mh-fallback)
  -> [fd00:1::5]:8080             Masq    1      0          0         
`;
  assertEquals([...parseConnections(list)], [
    ["TCP/10.0.0.1:80|10.1.0.1:8080", { active: 3, inactive: 7 }],
    ["UDP/10.0.0.2:53|10.1.0.2:53", { active: 0, inactive: 2 }],
    ["TCP/[fd00::1]:80|[fd00:1::5]:8080", { active: 0, inactive: 0 }],
  ]);
  const stats = `IP Virtual Server version 1.2.1 (size=4096)
Prot LocalAddress:Port               Conns   InPkts  OutPkts  InBytes OutBytes
  -> RemoteAddress:Port
TCP  10.0.0.1:80                         4       20       18     1400     2600
  -> 10.1.0.1:8080                       4       20       18     1400     2600
SCTP 10.0.0.3:99                         0        0        0        0        0
`;
  assertEquals([...parseStats(stats)], [
    ["TCP/10.0.0.1:80", { connections: 4, packetsIn: 20, packetsOut: 18, bytesIn: 1400, bytesOut: 2600 }],
    ["SCTP/10.0.0.3:99", { connections: 0, packetsIn: 0, packetsOut: 0, bytesIn: 0, bytesOut: 0 }],
  ]);
});
