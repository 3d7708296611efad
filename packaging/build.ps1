# Build the one-folder vramgui bundle on Windows with PyInstaller.
#
#   powershell -ExecutionPolicy Bypass -File packaging\build.ps1
#   powershell -ExecutionPolicy Bypass -File packaging\build.ps1 -Python "py -3.12" -Venv C:\build\venv
#
# The package is installed into the build venv as a regular (non-editable) install, so that the
# bundle holds exactly what `pip install .` gives, resources included.
param(
    [string]$Python = "py -3",
    [string]$Venv = "build\venv"
)
$ErrorActionPreference = "Stop"
Set-Location (Join-Path $PSScriptRoot "..")

function Invoke-Checked {
    param([string]$Exe, [string[]]$Arguments)
    & $Exe @Arguments
    if ($LASTEXITCODE -ne 0) { throw "$Exe $($Arguments -join ' ') failed with $LASTEXITCODE" }
}

$venvPython = Join-Path $Venv "Scripts\python.exe"
if (-not (Test-Path $venvPython)) {
    $parts = @($Python -split "\s+" | Where-Object { $_ })
    $launcherArgs = @($parts | Select-Object -Skip 1)
    Invoke-Checked $parts[0] ($launcherArgs + @("-m", "venv", $Venv))
}
Invoke-Checked $venvPython @("-m", "pip", "install", "-q", "--upgrade", "pip")
Invoke-Checked $venvPython @("-m", "pip", "install", "-q", "--force-reinstall", "--no-deps", ".")
Invoke-Checked $venvPython @("-m", "pip", "install", "-q", ".[build]")
Invoke-Checked $venvPython @("-m", "PyInstaller", "--noconfirm", "--clean", "--log-level", "WARN",
    "--distpath", "dist", "--workpath", "build\pyinstaller", "packaging\vramgui.spec")

$name = & $venvPython -c "import sys; sys.path.insert(0, 'packaging'); import bundle_config; print(bundle_config.project_metadata()[0])"
$size = (Get-ChildItem -Recurse -File "dist\$name" | Measure-Object -Property Length -Sum).Sum / 1MB
Write-Output ("built dist\{0}\{0}.exe ({1:N0} MB)" -f $name, $size)
