-- The front's routes in nginx (trainyard/front/nginx_conf.py): which replica a fast /serve/ request goes to.
--
-- The server PUTs the routes to the control socket (only its own account can reach it) as lines of
-- "NAME IP PORT HOST:PORT TOKEN" (TOKEN "-": none); they are kept in shared memory with a version, and each
-- worker parses them again only when the version moved. A request's replica is chosen in the access phase (round
-- robin per service), so that its Host and token headers are that replica's; the balancer then connects to it.

local _M = {}

local shared = ngx.shared.trainyard_routes
local grants = ngx.shared.trainyard_grants
local inflight = ngx.shared.trainyard_inflight
local ffi = require("ffi")
-- a request's time to the microsecond: nginx's own ($request_time, ngx.now) is to the millisecond, so a fast
-- replica's requests would all have read 0 ms in `service show`
ffi.cdef[[
typedef struct { long tv_sec; long tv_nsec; } trainyard_timespec;
int clock_gettime(int clock, trainyard_timespec *tp);
]]
local timespec = ffi.new("trainyard_timespec")
local CLOCK_MONOTONIC = 1

local function clock()
    ffi.C.clock_gettime(CLOCK_MONOTONIC, timespec)
    return tonumber(timespec.tv_sec) + tonumber(timespec.tv_nsec) * 1e-9
end

local routes, version = {}, nil
local turns = {}
-- a caller's X-Forwarded-* header of a name nginx neither sets nor drops (nginx_conf.claims_pattern, given at start):
-- the Python hop drops them all, and nginx cannot drop headers by a prefix of their names, so such a request goes
-- the Python way
local claim = nil
-- the most of a request's line and headers the Python server takes (api/bounded_http.py MAX_HEAD): a larger one goes
-- its way, to be answered 431 as without nginx
local max_head = 0

function _M.configure(pattern, head)
    claim, max_head = pattern, head
end

-- requests the Python hop sends again to another replica that hung up before answering (api/upstream_conn.py)
local IDEMPOTENT = {GET = true, HEAD = true, OPTIONS = true, PUT = true, DELETE = true, TRACE = true}

local function parse(text)
    local parsed = {}
    for name, ip, port, address, token in string.gmatch(text, "(%S+) (%S+) (%d+) (%S+) (%S+)\n") do
        local list = parsed[name]
        if not list then
            list = {}
            parsed[name] = list
        end
        list[#list + 1] = {ip = ip, port = tonumber(port), address = address, token = token ~= "-" and token or ""}
    end
    return parsed
end

local function current()
    local v = shared:get("version")
    if v ~= version then
        routes = parse(shared:get("text") or "")
        version = v
    end
    return routes
end

function _M.put_routes()
    if ngx.req.get_method() ~= "PUT" then
        return ngx.exit(405)
    end
    ngx.req.read_body()
    local body = ngx.req.get_body_data() or ""
    local ok, err = shared:set("text", body)
    if not ok then
        ngx.log(ngx.ERR, "trainyard routes not kept: ", err)
        return ngx.exit(507)
    end
    shared:incr("version", 1, 0)
    ngx.status = 204
    return ngx.exit(204)
end

-- lines of "KEY NAME" (nginx_conf.grant_key), each taken for `seconds`; a line "forget" drops every grant first
function _M.put_grants(seconds)
    if ngx.req.get_method() ~= "PUT" then
        return ngx.exit(405)
    end
    ngx.req.read_body()
    local body = ngx.req.get_body_data() or ""
    if string.sub(body, 1, 7) == "forget\n" then
        grants:flush_all()
        body = string.sub(body, 8)
    end
    for key in string.gmatch(body, "([^\n]+)\n") do
        grants:set(key, true, seconds)
    end
    return ngx.exit(204)
end

-- the caller's token, if the server let it in to this service lately (a server with users)
local function granted(name)
    local token = string.match(ngx.var.http_authorization or "", "^Bearer ([%w_%-]+)$")
    return token ~= nil and grants:get(ngx.encode_base64(ngx.sha1_bin(token)) .. " " .. name) ~= nil
end

function _M.choose(users)
    local name = ngx.var.ty_name
    if ngx.var.ty_plain ~= "1" or name == "" then
        return ngx.exec("@ty_api")
    end
    if ngx.var.ty_authorized ~= "1" and not (users and granted(name)) then
        return ngx.exec("@ty_api")
    end
    local head = ngx.req.raw_header()
    if #head > max_head or ngx.re.find(head, claim, "ijo") then
        return ngx.exec("@ty_api")
    end
    local list = current()[name]
    if not list then  -- no ready replica here (a cold start, a service of another name): the Python server
        return ngx.exec("@ty_api")
    end
    local turn = (turns[name] or 0) % #list + 1
    turns[name] = turn
    local replica = list[turn]
    ngx.ctx.replica = replica
    ngx.var.ty_host = replica.address
    ngx.var.ty_token = replica.token
    -- counted until the request's log phase, wherever it ends (a variable outlives an internal redirect; ctx not),
    -- under this worker's number: a worker that crashed never counts its requests down, and the one started in its
    -- place (the same number) forgets them (worker_started)
    local key = replica.address .. " " .. ngx.worker.id()
    inflight:incr(key, 1, 0)
    ngx.var.ty_counted = key
    ngx.var.ty_began = string.format("%.6f", clock())
end

-- the log phase, before nginx's access log writes the request's line (with $ty_took)
function _M.done()
    local key = ngx.var.ty_counted
    if key ~= nil and key ~= "" then
        inflight:incr(key, -1, 0)
        ngx.var.ty_took = string.format("%.6f", math.max(0, clock() - tonumber(ngx.var.ty_began)))
    end
end

-- a worker starting: nginx's start, or one in place of a worker that died (the front never reloads, so no worker of
-- this number is still serving)
function _M.worker_started()
    local suffix = " " .. ngx.worker.id()
    for _, key in ipairs(inflight:get_keys(0)) do
        if string.sub(key, -#suffix) == suffix then
            inflight:delete(key)
        end
    end
end

-- GET ?address=HOST:PORT: the fast requests under way to that replica (the server drains one only once none is)
function _M.get_inflight()
    local address, n = ngx.unescape_uri(ngx.var.arg_address or ""), 0
    for id = 0, ngx.worker.count() - 1 do
        n = n + (inflight:get(address .. " " .. id) or 0)
    end
    ngx.say(n)
end

-- nginx's 502 on the fast path (the replica refused, hung up, or answered what is no HTTP): the Python server tries
-- another replica if the request may be sent again there, as its own hop does: nothing of it reached this one, or
-- an idempotent request had no byte of an answer. Any other is answered 502 here: a POST the replica may have begun
-- is not run twice
function _M.broken()
    local sent = tonumber(string.match(ngx.var.upstream_bytes_sent or "", "(%d+)%s*$")) or 0
    local got = tonumber(string.match(ngx.var.upstream_bytes_received or "", "(%d+)%s*$")) or 0
    if sent == 0 or (IDEMPOTENT[ngx.req.get_method()] and got == 0) then
        return
    end
    ngx.var.ty_answered = "1"
    local why = got == 0 and "the replica closed the connection without an answer"
        or "the replica closed the connection in the middle of its answer"
    local body = '{"code": "replica_unreachable", "message": "the replica of service ' .. ngx.var.ty_name
        .. ' did not answer: ' .. why .. '", "details": {}}'
    ngx.status = 502
    ngx.header["Content-Type"] = "application/json"
    ngx.header["Content-Length"] = #body
    ngx.print(body)
    return ngx.exit(ngx.HTTP_OK)  -- the answer is out: the request ends with it
end

function _M.balance()
    local replica = ngx.ctx.replica
    local balancer = require("ngx.balancer")
    balancer.set_more_tries(0)
    local ok, err = balancer.set_current_peer(replica.ip, replica.port)
    if not ok then
        ngx.log(ngx.ERR, "trainyard: no peer ", replica.address, ": ", err)
        return ngx.exit(502)
    end
end

-- the replica's answer: never a Set-Cookie of the server's sign-in cookie (api/serve_origin.py `returned`)
function _M.drop_cookie(name)
    local set = ngx.header["Set-Cookie"]
    if set == nil then
        return
    end
    if type(set) == "string" then
        set = {set}
    end
    local kept, prefix = {}, "^%s*" .. name:gsub("%p", "%%%0") .. "%s*="
    for _, cookie in ipairs(set) do
        if not string.find(cookie, prefix) then
            kept[#kept + 1] = cookie
        end
    end
    if #kept < #set then
        ngx.header["Set-Cookie"] = #kept > 0 and kept or nil
    end
end

return _M
