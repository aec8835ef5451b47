-- A second, independent LSP client for the StitchCUDA server: headless Neovim (0.7.2 and later).
--
--   nvim --headless --clean -c "luafile tests/nvim_client.lua" </dev/null
--
-- It starts the server, opens a Python file, lists the code actions at `class <CLASS>(`, runs
-- stitchcuda.optimize on that class, polls stitchcuda.jobs until the job leaves "running", waits
-- for the buffer's diagnostics and writes what it saw as JSON. Every wait is bounded; the script
-- always quits: exit code 0 when it got that far, 1 otherwise (the JSON then has "error").
--
-- Environment (all paths absolute):
--   STITCHCUDA_NVIM_PYTHON     the Python that runs `-m stitchcuda.cli serve`
--   STITCHCUDA_NVIM_WORKSPACE  the root folder
--   STITCHCUDA_NVIM_FILE       the Python file to open
--   STITCHCUDA_NVIM_RESULT     where to write the JSON
--   STITCHCUDA_NVIM_REPLAY     optional: settings.replay (a recorded run)
--   STITCHCUDA_NVIM_RUNS       optional: settings.runsFolder
--   STITCHCUDA_NVIM_CLASS      optional, default "Block"
--   STITCHCUDA_NVIM_TIMEOUT    optional: seconds to wait for the job, default 200

local result = {
  code_actions = {}, job = vim.NIL, diagnostics = {}, messages = {}, progress = {},
  job_updates = 0, config_requests = {}, error = vim.NIL,
}

local function env(name, default)
  local v = os.getenv(name)
  if v == nil or v == "" then
    if default == nil then error("environment variable " .. name .. " is not set") end
    return default
  end
  return v
end

local function write_result(path)
  local f = assert(io.open(path, "w"))
  f:write(vim.json.encode(result))
  f:close()
end

-- One request to every client on the buffer; answers (result) or raises with what went wrong.
local function request(bufnr, method, params, timeout_ms)
  local got, err = vim.lsp.buf_request_sync(bufnr, method, params, timeout_ms)
  if got == nil then
    error(string.format("%s: no answer within %d ms (%s)", method, timeout_ms, tostring(err)))
  end
  local _, answer = next(got)
  if answer == nil then error(method .. ": no client answered") end
  if answer.err then
    error(string.format("%s failed: %s", method, answer.err.message or vim.inspect(answer.err)))
  end
  return answer.result
end

local function main()
  local python = env("STITCHCUDA_NVIM_PYTHON")
  local workspace = env("STITCHCUDA_NVIM_WORKSPACE")
  local file = env("STITCHCUDA_NVIM_FILE")
  local class_name = env("STITCHCUDA_NVIM_CLASS", "Block")
  local job_timeout_s = tonumber(env("STITCHCUDA_NVIM_TIMEOUT", "200"))

  local settings = { rounds = 1 }
  if os.getenv("STITCHCUDA_NVIM_REPLAY") then settings.replay = os.getenv("STITCHCUDA_NVIM_REPLAY") end
  if os.getenv("STITCHCUDA_NVIM_RUNS") then settings.runsFolder = os.getenv("STITCHCUDA_NVIM_RUNS") end

  -- 0.7.2 answers workspace/configuration (from `settings`) but does not advertise it: without
  -- this the server never asks, and every job runs with the defaults (no replay).
  -- STITCHCUDA_NVIM_SETTINGS=init: a plain client that is never asked and passes its settings in
  -- initializationOptions instead.
  local via_init = os.getenv("STITCHCUDA_NVIM_SETTINGS") == "init"
  local capabilities = vim.lsp.protocol.make_client_capabilities()
  capabilities.workspace = capabilities.workspace or {}
  capabilities.workspace.configuration = not via_init
  capabilities.window = capabilities.window or {}
  capabilities.window.workDoneProgress = true

  local default_progress = vim.lsp.handlers["$/progress"]
  local default_configuration = vim.lsp.handlers["workspace/configuration"]
  local client_id = vim.lsp.start_client({
    name = "stitchcuda",
    cmd = { python, "-m", "stitchcuda.cli", "serve" },
    root_dir = workspace,
    capabilities = capabilities,
    settings = { stitchcuda = settings },
    init_options = via_init and { stitchcuda = settings } or nil,
    handlers = {
      -- Recorded rather than shown: headless, an Error message would go to stderr as an error.
      ["window/showMessage"] = function(_, params)
        table.insert(result.messages, { type = params.type, message = params.message })
        return vim.NIL
      end,
      ["window/logMessage"] = function() return vim.NIL end,
      ["$/progress"] = function(err, params, ctx, config)
        local v = params.value or {}
        table.insert(result.progress, { token = params.token, kind = v.kind, message = v.message })
        return default_progress(err, params, ctx, config)
      end,
      ["workspace/configuration"] = function(err, params, ctx, config)
        for _, item in ipairs(params.items or {}) do table.insert(result.config_requests, item.section or "") end
        return default_configuration(err, params, ctx, config)
      end,
      ["stitchcuda/jobUpdate"] = function() result.job_updates = result.job_updates + 1 end,
    },
    on_exit = function(code, signal) result.server_exit = { code = code, signal = signal } end,
  })
  if not client_id then error("vim.lsp.start_client failed") end

  vim.cmd("edit " .. vim.fn.fnameescape(file))
  local bufnr = vim.api.nvim_get_current_buf()
  if not vim.lsp.buf_attach_client(bufnr, client_id) then error("buf_attach_client failed") end
  local ready = vim.wait(60000, function()
    local c = vim.lsp.get_client_by_id(client_id)
    return (c and c.initialized) or result.server_exit ~= nil
  end, 20)
  if not ready or result.server_exit then
    error("the server did not initialize: " .. vim.inspect(result.server_exit or "60 s"))
  end

  local line
  for i, text in ipairs(vim.api.nvim_buf_get_lines(bufnr, 0, -1, false)) do
    if text:match("^class " .. class_name .. "%(") then line = i - 1; break end
  end
  if not line then error("no `class " .. class_name .. "(` in " .. file) end
  result.class_line = line

  local uri = vim.uri_from_bufnr(bufnr)
  local pos = { line = line, character = 0 }
  local actions = request(bufnr, "textDocument/codeAction", {
    textDocument = { uri = uri }, range = { start = pos, ["end"] = pos },
    context = { diagnostics = {} },  -- an empty Lua table goes out as []
  }, 10000) or {}
  for _, a in ipairs(actions) do table.insert(result.code_actions, a.title) end

  local started = request(bufnr, "workspace/executeCommand",
    { command = "stitchcuda.optimize", arguments = { uri, class_name } }, 30000)
  result.started = started

  local deadline = vim.loop.now() + job_timeout_s * 1000
  local job
  while true do
    local jobs = request(bufnr, "workspace/executeCommand", { command = "stitchcuda.jobs" }, 10000) or {}
    for _, j in ipairs(jobs) do
      if j.jobId == started.jobId then job = j end
    end
    if job and job.state ~= "running" then break end
    if vim.loop.now() > deadline then
      error(string.format("job %s still running after %d s", started.jobId, job_timeout_s))
    end
    vim.wait(200)
  end
  result.job = { jobId = job.jobId, state = job.state, message = job.message, hasProposal = job.hasProposal }

  -- The server publishes after the job's state changes: wait (bounded) for them to arrive.
  vim.wait(30000, function() return #vim.diagnostic.get(bufnr) > 0 end, 50)
  for _, d in ipairs(vim.diagnostic.get(bufnr)) do
    table.insert(result.diagnostics, {
      line = d.lnum, col = d.col, message = d.message, code = d.code or vim.NIL,
      source = d.source or vim.NIL, severity = d.severity,
    })
  end
  -- Let the progress `end` arrive (it is sent before the diagnostics, but allow for it).
  vim.wait(5000, function()
    for _, p in ipairs(result.progress) do if p.kind == "end" then return true end end
    return false
  end, 50)
  local c = vim.lsp.get_client_by_id(client_id)
  if c then result.progress_state = c.messages.progress[started.token] end

  vim.lsp.stop_client(client_id)
  vim.wait(10000, function() return result.server_exit ~= nil end, 50)
end

local ok, err = xpcall(main, debug.traceback)
if not ok then result.error = tostring(err) end
local out = os.getenv("STITCHCUDA_NVIM_RESULT")
local wrote, werr = pcall(write_result, out or "nvim_client_result.json")
if not ok or not wrote then
  io.stderr:write("nvim_client.lua: " .. tostring(err or werr) .. (wrote and "" or ("; " .. tostring(werr))) .. "\n")
  vim.cmd("cquit 1")
end
vim.cmd("qall!")
