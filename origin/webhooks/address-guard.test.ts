import { describe, expect, it } from "vitest";
import { checkWebhookUrl, guardedLookup, isPrivateAddress } from "./address-guard.ts";

describe("isPrivateAddress", () => {
  it.each([
    ["127.0.0.1", true],
    ["127.255.0.9", true],
    ["0.0.0.0", true],
    ["10.1.2.3", true],
    ["100.64.0.1", true],
    ["100.127.255.254", true],
    ["169.254.169.254", true],
    ["172.16.0.1", true],
    ["172.31.255.255", true],
    ["192.168.1.1", true],
    ["224.0.0.1", true],
    ["255.255.255.255", true],
    ["::1", true],
    ["::", true],
    ["fe80::1", true],
    ["fc00::1", true],
    ["fd12:3456::1", true],
    ["::ffff:127.0.0.1", true],
    ["::ffff:7f00:1", true],
    ["::ffff:169.254.169.254", true],
    ["64:ff9b::10.0.0.1", true],
    ["not an address", true],
    ["8.8.8.8", false],
    ["93.184.216.34", false],
    ["100.63.255.255", false],
    ["100.128.0.0", false],
    ["172.32.0.1", false],
    ["2606:4700::1111", false],
    ["::ffff:8.8.8.8", false],
    // IPv6 forms that carry an IPv4 address are refused like the IPv4 they carry.
    ["::ffff:0:127.0.0.1", true], // IPv4-translated
    ["0:0:0:0:0:ffff:a00:1", true], // mapped, written in full
    ["[::ffff:192.168.0.1]", true],
    ["::127.0.0.1", true], // IPv4-compatible
    ["::10.0.0.1", true],
    ["::8.8.8.8", false],
    ["64:ff9b::127.0.0.1", true], // NAT64
    ["64:ff9b::a9fe:a9fe", true], // NAT64 of 169.254.169.254
    ["64:ff9b:0:0:0:0:c0a8:101", true], // NAT64 in full, 192.168.1.1
    ["64:ff9b::8.8.8.8", false],
    ["64:ff9b:1::8.8.8.8", true], // NAT64 for local use: its translation is the network's own
    ["2002:7f00:1::", true], // 6to4 of 127.0.0.1
    ["2002:0a00:0001:1::5", true], // 6to4 of 10.0.0.1
    ["2002:c0a8:0101::1", true], // 6to4 of 192.168.1.1
    ["2002:a9fe:a9fe::", true], // 6to4 of 169.254.169.254
    ["2002:808:808::1", false], // 6to4 of 8.8.8.8
    ["2001:0:4136:e378:8000:63bf:80ff:fffe", true], // Teredo, client 127.0.0.1 (inverted)
    ["2001:0:4136:e378:8000:63bf:f5ff:fffe", true], // Teredo, client 10.0.0.1
    ["2001:0:a00:1:8000:63bf:f7f7:f7f7", true], // Teredo, server 10.0.0.1
    ["2001:0:4136:e378:8000:63bf:f7f7:f7f7", false], // Teredo, server 65.54.227.120, client 8.8.8.8
    ["2001:db8::1", false],
    ["100::1", true], // discard-only
    ["fe80::1%eth0", true],
  ])("%s → %s", (address, expected) => {
    expect(isPrivateAddress(address)).toBe(expected);
  });
});

describe("checkWebhookUrl", () => {
  const resolve = async (host: string): Promise<string[]> =>
    host === "public.example"
      ? ["93.184.216.34"]
      : host === "mixed.example"
        ? ["93.184.216.34", "10.0.0.1"]
        : ["127.0.0.1"];
  it.each([
    ["https://public.example/hook", false, "ok"],
    ["https://mixed.example/hook", false, "private_address"],
    ["http://localhost/hook", false, "private_address"],
    ["http://[::1]/hook", false, "private_address"],
    ["http://169.254.169.254/", false, "private_address"],
    ["http://[2002:7f00:1::]:8080/", false, "private_address"],
    ["http://[64:ff9b::a9fe:a9fe]/", false, "private_address"],
    ["ftp://public.example/", false, "bad_scheme"],
    ["http://user:pw@public.example/", false, "bad_url"],
    ["not a url", false, "bad_url"],
    ["https://public.example/hook\u0000", false, "bad_url"],
    ["https://public.example/h\u007fk", true, "bad_url"],
    ["https://public.example/a\tb", false, "bad_url"],
    [" https://public.example/hook", false, "bad_url"],
    ["https://public.example/a%20b", false, "ok"],
    ["http://127.0.0.1:9/hook", true, "ok"],
    ["gopher://127.0.0.1/", true, "bad_scheme"],
  ])("%s (allowPrivate %s) → %s", async (url, allowPrivate, expected) => {
    const checked = await checkWebhookUrl(url, { allowPrivate, resolve });
    expect(checked.ok ? "ok" : checked.code).toBe(expected);
  });

  it("the connect-time lookup refuses a name whose addresses include a private one", async () => {
    const lookup = guardedLookup(async () => ["93.184.216.34", "127.0.0.1"]);
    const error = await new Promise((done) =>
      lookup("rebind.example", { all: true }, (failure) => done(failure)),
    );
    expect(error).toMatchObject({ code: "EPRIVATEADDRESS" });
    const fine = guardedLookup(async () => ["93.184.216.34"]);
    const address = await new Promise((done) => fine("ok.example", {}, (_e, value) => done(value)));
    expect(address).toBe("93.184.216.34");
  });
});
